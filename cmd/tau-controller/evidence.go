package main

import (
	"context"
	"errors"
	"flag"
	"github.com/taugrid/taugrid/server/httplimit"
	"os"
	"time"

	"github.com/taugrid/taugrid/controllers/sealing"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/policy"
	"github.com/taugrid/taugrid/runs"
	"github.com/taugrid/taugrid/server"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

type evidenceOptions struct {
	addr, dir, url, retention string
	s3                        evidence.S3Options
	linkTTL                   time.Duration
	linkKeySecret             string
	attestationKeySecret      string
}

func evidenceFlags(fs *flag.FlagSet, o *evidenceOptions) {
	fs.StringVar(&o.addr, "evidence-bind-address", ":8090", "evidence page address (/runs/<namespace>/<name>); 0 disables the page")
	fs.StringVar(&o.dir, "evidence-dir", "/var/lib/taugrid/evidence", "evidence store directory (a PersistentVolume), unless --evidence-s3-bucket is set")
	fs.StringVar(&o.url, "evidence-url", "", "external URL of the evidence page, e.g. https://tau.example.com; sets each run's status.evidenceURL")
	fs.DurationVar(&o.linkTTL, "evidence-link-ttl", 30*24*time.Hour, "how long the signed evidence link on a commit opens its run's page, from the run's creation")
	fs.StringVar(&o.linkKeySecret, "evidence-link-key-secret", "tau-evidence-link-key", "Secret in --namespace holding the key that signs evidence links; created with a random key if missing")
	fs.StringVar(&o.attestationKeySecret, "attestation-key-secret", "tau-attestation-key", "Secret in --namespace holding the ECDSA P-256 key (cosign.key, PKCS#8 PEM; cosign.pub) that signs every sealed bundle's in-toto attestation; created with a fresh key if missing")
	fs.StringVar(&o.retention, "evidence-retention", "", "prune sealed bundles: 30d, 720h, last=500 or 30d,last=500; empty keeps all")
	fs.StringVar(&o.s3.Endpoint, "evidence-s3-endpoint", "", "S3-compatible endpoint host:port; credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	fs.StringVar(&o.s3.Bucket, "evidence-s3-bucket", "", "S3 bucket for evidence; set to use S3 instead of --evidence-dir")
	fs.StringVar(&o.s3.Prefix, "evidence-s3-prefix", "", "prefix of every evidence object in the bucket")
	fs.StringVar(&o.s3.Region, "evidence-s3-region", "", "S3 region")
	fs.BoolVar(&o.s3.Insecure, "evidence-s3-insecure", false, "talk to the S3 endpoint over plain HTTP")
}

// setupEvidence builds the evidence store, the recorder the run reconciler
// calls, the page server and the retention pruner.
// setupEvidence builds the evidence controller and the page it serves,
// and says where the page is (for the run controller's links).
func setupEvidence(mgr manager.Manager, cfg *rest.Config, git *gitsource.Client, sources *server.Sources, policies *policy.PolicyStore, o options) (*sealing.EvidenceRecorder, *evidence.Page, error) {
	eo := o.evidence
	store, err := evidenceStore(eo)
	if err != nil {
		return nil, nil, err
	}
	retention, err := evidence.ParseRetention(eo.retention)
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	metrics, err := sealing.NewEvidenceMetrics(crmetrics.Registry)
	if err != nil {
		return nil, nil, err
	}
	direct, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme()}) // Secrets, around the cache
	if err != nil {
		return nil, nil, err
	}
	links, err := evidenceLinks(direct, o)
	if err != nil {
		return nil, nil, err
	}
	keys, err := attestationKeys(mgr, cfg, direct, o)
	if err != nil {
		return nil, nil, err
	}
	book, err := sealing.NewEventBook(cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := mgr.Add(book); err != nil {
		return nil, nil, err
	}
	c := mgr.GetClient()
	rec := &sealing.EvidenceRecorder{Client: c, APIReader: mgr.GetAPIReader(), Events: book, Logs: runs.PodLogs{Pods: cs.CoreV1()},
		Files: &policy.GitFiles{Client: c, Git: git}, Policies: policies, Attestations: keys,
		Sources: sources, Store: store, Clock: clock.RealClock{}, Recorder: mgr.GetEventRecorder("tau-evidence"), Metrics: metrics}
	if retention != (evidence.Retention{}) {
		if err := mgr.Add(&sealing.PruneEvidence{Store: store, Retention: retention, Interval: time.Hour, Clock: clock.RealClock{}}); err != nil {
			return nil, nil, err
		}
	}
	if eo.addr != "0" {
		// The runs API's tokens: a team's token reads its own evidence.
		page := &evidence.Server{Store: store, Runs: &sealing.EvidenceRuns{Client: c}, Log: ctrl.Log.WithName("evidence"),
			Links: links, PublicKey: keys, Tokens: &server.Tokens{Reader: mgr.GetAPIReader(), Namespace: o.namespace, Clock: clock.RealClock{}}}
		srv := httplimit.NewServer(eo.addr, page.Handler())
		if err := mgr.Add(httpRunnable{srv}); err != nil {
			return nil, nil, err
		}
	}
	return rec, &evidence.Page{URL: eo.url, Links: links}, nil
}

// evidenceLinks reads (or creates) the key that signs evidence links,
// before the manager starts, with a client of its own.
func evidenceLinks(c client.Client, o options) (*evidence.Links, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key, err := sealing.EvidenceLinkKey(ctx, c, o.namespace, o.evidence.linkKeySecret)
	if err != nil {
		return nil, err
	}
	return &evidence.Links{Key: key, TTL: o.evidence.linkTTL}, nil
}

// attestationKeys reads (or creates) the key that signs attestations at
// start, so that the platform team can print its public key at once; a
// key that does not parse is reported here and stops every seal. Each
// seal then reads the key's Secret from a watch of it alone.
func attestationKeys(mgr manager.Manager, cfg *rest.Config, c client.Client, o options) (*sealing.AttestationKeys, error) {
	watched, err := sealing.KeySecretCache(cfg, mgr.GetScheme(), o.namespace, o.evidence.attestationKeySecret)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(watched); err != nil {
		return nil, err
	}
	keys := &sealing.AttestationKeys{Client: c, Cache: watched, Namespace: o.namespace, Name: o.evidence.attestationKeySecret}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := keys.Key(ctx); err != nil {
		ctrl.Log.WithName("evidence").Error(err, "the attestation key cannot sign: no bundle is sealed until it can")
	}
	return keys, nil
}

func evidenceStore(eo evidenceOptions) (evidence.Store, error) {
	if eo.s3.Bucket == "" {
		return evidence.NewFileStore(eo.dir)
	}
	eo.s3.AccessKey, eo.s3.SecretKey = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if eo.s3.AccessKey == "" || eo.s3.SecretKey == "" {
		return nil, errors.New("--evidence-s3-bucket needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment")
	}
	return evidence.NewS3Store(eo.s3)
}
