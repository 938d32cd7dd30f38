package controlplane

import (
	"context"
	"testing"
	"time"
)

func TestTmpKueue(t *testing.T) {
	begin := time.Now()
	env, err := Start(context.Background(), Options{Kueue: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("start %s", time.Since(begin))
	tn := setUpTenant(t, env.Client, 1)
	first := tn.suspendedJob("first", 1)
	create(t, env.Client, first)
	waitForJobState(t, env.Client, first, jobState{Suspended: false, QuotaReserved: "True"})
	t.Logf("admitted %s", time.Since(begin))
	env.stop(true)
	t.Logf("logs %s", env.LogDir)
}
