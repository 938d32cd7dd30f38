package nodeagent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestXIDPolicyClassifiesByTheCatalog(t *testing.T) {
	cases := map[string]struct {
		fatal, ignore []uint64
		xid           uint64
		want          XIDRule
	}{
		"79, fallen off the bus, needs a reboot":          {xid: 79, want: XIDRule{XIDFatal, ActionRebootNode, "GPU has fallen off the bus"}},
		"48, a double-bit ECC error, needs a reset":       {xid: 48, want: XIDRule{XIDFatal, ActionResetGPU, "double-bit ECC error"}},
		"64, a failed remap, needs a reset":               {xid: 64, want: XIDRule{XIDFatal, ActionResetGPU, "row remap or page retirement failure"}},
		"74, an NVLink error, needs a reset":              {xid: 74, want: XIDRule{XIDFatal, ActionResetGPU, "NVLink error"}},
		"95, an uncontained ECC error, is fatal":          {xid: 95, want: XIDRule{XIDFatal, ActionResetGPU, "uncontained ECC error"}},
		"119, a GSP timeout, is fatal":                    {xid: 119, want: XIDRule{XIDFatal, ActionResetGPU, "GSP RPC timeout"}},
		"120, a GSP error, is fatal":                      {xid: 120, want: XIDRule{XIDFatal, ActionResetGPU, "GSP error"}},
		"13, an application's exception, is ignored":      {xid: 13, want: XIDRule{XIDIgnore, ActionRestartApp, "graphics engine exception"}},
		"31, an application's page fault, is ignored":     {xid: 31, want: XIDRule{XIDIgnore, ActionRestartApp, "GPU memory page fault"}},
		"43 is ignored":                                   {xid: 43, want: XIDRule{XIDIgnore, ActionNone, "GPU stopped processing"}},
		"45 is ignored":                                   {xid: 45, want: XIDRule{XIDIgnore, ActionNone, "preemptive cleanup"}},
		"68 is ignored":                                   {xid: 68, want: XIDRule{XIDIgnore, ActionRestartApp, "NVDEC0 exception"}},
		"109 is ignored":                                  {xid: 109, want: XIDRule{XIDIgnore, ActionRestartApp, "context-switch timeout"}},
		"94, a contained ECC error, is the application's": {xid: 94, want: XIDRule{XIDIgnore, ActionRestartApp, "contained ECC error"}},
		"63, a remap recorded, is a warning: the row-remap check judges the memory": {
			xid: 63, want: XIDRule{XIDWarning, ActionNone, "row remap or page retirement recorded"}},
		"92, a high single-bit rate, is a warning": {xid: 92, want: XIDRule{XIDWarning, ActionNone, "high single-bit ECC error rate"}},
		"an XID the table does not know is a warning, never a taint": {
			xid: 4242, want: XIDRule{XIDWarning, ActionUnknown, "XID not in the policy table"}},
		"999, NVML's unknown XID, is a warning": {xid: 999, want: XIDRule{XIDWarning, ActionUnknown, "unknown XID (NVML reported 999)"}},
		"an operator can make an ignored XID fatal": {
			fatal: []uint64{94}, xid: 94, want: XIDRule{XIDFatal, ActionResetGPU, "contained ECC error"}},
		"an operator can make an unknown XID fatal": {
			fatal: []uint64{4242}, xid: 4242, want: XIDRule{XIDFatal, ActionResetGPU, "XID not in the policy table"}},
		"an operator can ignore a fatal XID": {
			ignore: []uint64{79}, xid: 79, want: XIDRule{XIDIgnore, ActionRebootNode, "GPU has fallen off the bus"}},
		"ignore wins over fatal": {
			fatal: []uint64{45}, ignore: []uint64{45}, xid: 45, want: XIDRule{XIDIgnore, ActionResetGPU, "preemptive cleanup"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DefaultXIDPolicy(tc.fatal, tc.ignore).Classify(tc.xid)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Classify(%d) (-want +got):\n%s", tc.xid, diff)
			}
		})
	}
}

func TestDefaultXIDPolicyIgnoresExactlyTheApplicationXIDs(t *testing.T) {
	want := []uint64{13, 31, 43, 45, 68, 94, 109}
	if diff := cmp.Diff(want, DefaultXIDPolicy(nil, nil).XIDs(XIDIgnore)); diff != "" {
		t.Errorf("ignored XIDs (-want +got):\n%s", diff)
	}
}

func TestParseXIDList(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    []uint64
		wantErr bool
	}{
		"empty is none":            {in: "", want: nil},
		"a list with spaces":       {in: "48, 79 ,94", want: []uint64{48, 79, 94}},
		"a trailing comma is fine": {in: "79,", want: []uint64{79}},
		"a word is an error":       {in: "79,lots", wantErr: true},
		"a negative is an error":   {in: "-1", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseXIDList(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
