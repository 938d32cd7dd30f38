package evidence

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/url"
	"strings"
	"testing"
)

// testKey is shaped like a PEM private key: 64-character base64 lines.
var testKey = "-----BEGIN OPENSSH PRIVATE KEY-----\n" +
	"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n" +
	"QyNTUxOQAAACBmZXN0LWtleS1ub3QtcmVhbC1qdXN0LXNoYXBlZC1saWtlLW9uZQAAAJj\n" +
	"Zm9yIHRlc3RzIG9ubHk6IG5vdCBhIGtleSB0aGF0IG9wZW5zIGFueXRoaW5nIGF0IGFs\n" +
	"bA==\n" +
	"-----END OPENSSH PRIVATE KEY-----\n"

// testSecrets are what a run's Secrets might hold: a password with URL
// metacharacters, an API key with a trailing newline (as `kubectl create
// secret --from-file` leaves it), and a private key.
var testSecrets = []string{"p@ss/w+rd&Zq9!", "wandb-0123456789abcdef\n", testKey}

func TestMaskHidesEveryEncodingOfASecret(t *testing.T) {
	m := NewMasker(testSecrets...)
	pw, key := "p@ss/w+rd&Zq9!", "wandb-0123456789abcdef"
	embedded := func(prefix, v string) string {
		return base64.StdEncoding.EncodeToString([]byte(prefix + v + " trailing"))
	}
	tests := map[string]struct{ in, gone string }{
		"base64 of the value":                {"auth " + base64.StdEncoding.EncodeToString([]byte(pw)), base64.StdEncoding.EncodeToString([]byte(pw))[:16]},
		"base64 of the value with a newline": {"echo: " + base64.StdEncoding.EncodeToString([]byte(key+"\n")), base64.StdEncoding.EncodeToString([]byte(key + "\n"))[:20]},
		"URL-safe base64, no padding":        {"t=" + base64.RawURLEncoding.EncodeToString([]byte(pw)), base64.RawURLEncoding.EncodeToString([]byte(pw))[:16]},
		"inside a base64 stream, offset 0":   {embedded("", key), embedded("", key)[:20]},
		"inside a base64 stream, offset 1":   {embedded("u:", key), embedded("u:", key)[4:20]},
		"inside a base64 stream, offset 2":   {embedded("us:", key), embedded("us:", key)[4:20]},
		"a basic auth header":                {"Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("alice:"+pw)), base64.StdEncoding.EncodeToString([]byte("alice:" + pw))[8:]},
		"hex, lower case":                    {"x=" + hex.EncodeToString([]byte(key)), hex.EncodeToString([]byte(key))},
		"hex, upper case":                    {"X=" + strings.ToUpper(hex.EncodeToString([]byte(key))), strings.ToUpper(hex.EncodeToString([]byte(key)))},
		"URL query escaping":                 {"GET /login?pw=" + url.QueryEscape(pw), url.QueryEscape(pw)},
		"URL path escaping":                  {"GET /u/" + url.PathEscape(pw), url.PathEscape(pw)},
		"one line of a key body":             {"line: QyNTUxOQAAACBmZXN0LWtleS1ub3QtcmVhbC1qdXN0LXNoYXBlZC1saWtlLW9uZQAAAJj", "QyNTUxOQAAACBm"},
		"the value itself":                   {"key is " + key + ".", key},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := m.Mask(tc.in)
			if strings.Contains(got, tc.gone) || !strings.Contains(got, Masked) {
				t.Errorf("Mask(%q) = %q: %q survives", tc.in, got, tc.gone)
			}
		})
	}
}

func TestMaskKeepsTextThatOnlyResemblesASecret(t *testing.T) {
	m := NewMasker(testSecrets...)
	for _, s := range []string{
		"epoch 3 loss 0.1234 lr=0.01",
		"max_tokens=12345678 temperature=0.7",
		"}", "-----END OPENSSH PRIVATE KEY-----",
		base64.StdEncoding.EncodeToString([]byte("an ordinary payload of bytes")),
	} {
		if got := m.Mask(s); got != s && s != "-----END OPENSSH PRIVATE KEY-----" {
			t.Errorf("Mask(%q) = %q, want it unchanged", s, got)
		}
	}
}

func TestMaskHidesValuesOfVariablesNamedLikeCredentials(t *testing.T) {
	m := NewMasker()
	tests := map[string]struct{ in, want string }{
		"an API key variable":      {"WANDB_API_KEY=3f9a8b7c6d5e4f30", "WANDB_API_KEY=****"},
		"an exported password":     {`export DB_PASSWORD="hunter2hunter2"`, `export DB_PASSWORD="****"`},
		"a token in YAML":          {"hf_auth_token: abcdefgh1234", "hf_auth_token: ****"},
		"a client secret in JSON":  {`{"client_secret": "s3cr3t-v4lue"}`, `{"client_secret": "****"}`},
		"AWS's secret access key":  {"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCY", "AWS_SECRET_ACCESS_KEY=****"},
		"a dotted credentials key": {"gcp.credentials=eyJ0eXBlIjoi", "gcp.credentials=****"},
		"a count of tokens stays":  {"num_tokens=12345678", "num_tokens=12345678"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := m.Mask(tc.in); got != tc.want {
				t.Errorf("Mask(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	for name, want := range map[string]bool{"WANDB_API_KEY": true, "HF_TOKEN": true, "DB_PASSWORD": true, "CLIENT_SECRET": true,
		"AWS_SECRET_ACCESS_KEY": true, "GOOGLE_APPLICATION_CREDENTIALS": true, "MAX_TOKENS": false, "TAU_RUN": false, "TOKENIZER": false} {
		if got := SecretEnvName(name); got != want {
			t.Errorf("SecretEnvName(%s) = %v, want %v", name, got, want)
		}
	}
}

// streamMask writes log to a MaskWriter in chunks of the given sizes
// (cycled) and returns what came out.
func streamMask(t testing.TB, m *Masker, log []byte, chunks []int) string {
	var out bytes.Buffer
	mw := m.NewWriter(&out)
	for i := 0; len(log) > 0; i++ {
		n := min(len(log), max(1, chunks[i%len(chunks)]))
		if _, err := mw.Write(log[:n]); err != nil {
			t.Fatal(err)
		}
		log = log[n:]
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestAStreamIsMaskedWhateverItsChunking(t *testing.T) {
	m := NewMasker(testSecrets...)
	long := strings.Repeat("x", 70<<10) // a line past maxMaskLine
	b64 := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("noise ", 12000) + "wandb-0123456789abcdef" + strings.Repeat(" noise", 12000)))
	tests := map[string]struct {
		log  string
		gone []string
		kept []string
	}{
		"a key from a Secret, printed": {log: "loading\n" + testKey + "done\n", gone: []string{"QyNTUxOQAAACBm", "Zm9yIHRlc3Rz"}, kept: []string{"loading\n", "done\n"}},
		"an unknown private key": {log: "cat id_rsa\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAunknownkeybodyline1\nMIIEowIBAAKCAQEAunknownkeybodyline2\n-----END RSA PRIVATE KEY-----\nafter\n",
			gone: []string{"unknownkeybody"}, kept: []string{"cat id_rsa\n", "after\n"}},
		"a secret in a line longer than 64 KiB": {log: long[:64<<10-5] + "p@ss/w+rd&Zq9!" + long + "\n", gone: []string{"p@ss/w+rd&Zq9!"}},
		"a secret deep in a long base64 line":   {log: b64 + "\n", gone: []string{base64.StdEncoding.EncodeToString([]byte("wandb-0123456789abcdef"))[4:16]}},
		"a keyed value in a long line":          {log: long[:64<<10-10] + " WANDB_API_KEY=3f9a8b7c6d5e4f30 " + long, gone: []string{"3f9a8b7c6d5e4f30"}},
		"a last line without a newline":         {log: "start\nwandb-0123456789abcdef", gone: []string{"wandb-0123"}, kept: []string{"start\n"}},
	}
	chunkings := map[string][]int{"whole": {1 << 30}, "bytes": {1}, "odd": {7, 3, 4096, 65536, 11}, "64 KiB": {64 << 10}}
	for name, tc := range tests {
		for cname, chunks := range chunkings {
			if cname == "bytes" && len(tc.log) > 4096 {
				chunks = []int{1, 1, 1, 8191}
			}
			t.Run(name+"/"+cname, func(t *testing.T) {
				got := streamMask(t, m, []byte(tc.log), chunks)
				for _, g := range tc.gone {
					if strings.Contains(got, g) {
						t.Errorf("%q survives masking", g)
					}
				}
				for _, k := range tc.kept {
					if !strings.Contains(got, k) {
						t.Errorf("%q was lost: %q", k, got[:min(len(got), 200)])
					}
				}
			})
		}
	}
}

func TestAStreamPassesCompleteLinesAtOnce(t *testing.T) {
	var out bytes.Buffer
	mw := NewMasker("hunter2-hunter2").NewWriter(&out)
	_, _ = mw.Write([]byte("epoch 1 password hunter2-hunter2\nepoch 2 part"))
	if got := out.String(); got != "epoch 1 password ****\n" {
		t.Errorf("after one line and a half: %q, want the first line, masked", got)
	}
	_ = mw.Close()
	if got := out.String(); !strings.HasSuffix(got, "epoch 2 part") {
		t.Errorf("after Close: %q, want the held half line too", got)
	}
}

// leaks returns a form of a test secret that survives in out.
func leaks(m *Masker, out string) string {
	for _, f := range m.forms {
		if !strings.ContainsAny(f, "\r\n") && strings.Contains(out, f) {
			return f
		}
	}
	return ""
}

// FuzzNoSecretOrEncodingSurvivesAnyChunking embeds a test secret, encoded
// one of several ways and surrounded by other bytes, in fuzzed text, and
// streams it through a MaskWriter in fuzzed chunks: no form of any secret
// may come out.
func FuzzNoSecretOrEncodingSurvivesAnyChunking(f *testing.F) {
	f.Add([]byte("step 1 loss 0.5\n"), uint8(0), uint16(3), []byte("ab"), []byte{5, 200, 1})
	f.Add([]byte("GET /login?pw= HTTP/1.1\n"), uint8(5), uint16(14), []byte(""), []byte{1})
	f.Add(bytes.Repeat([]byte("z"), 70<<10), uint8(2), uint16(65530), []byte("xyz"), []byte{255, 255, 255})
	f.Add([]byte("key:\n\nend\n"), uint8(7), uint16(5), []byte("\n"), []byte{64, 0, 9})
	m := NewMasker(testSecrets...)
	f.Fuzz(func(t *testing.T, text []byte, how uint8, at uint16, noise []byte, chunks []byte) {
		secret := []byte(strings.TrimSpace(testSecrets[int(how)%len(testSecrets)]))
		var enc string
		switch how % 8 {
		case 0, 1:
			enc = string(secret)
		case 2:
			enc = base64.StdEncoding.EncodeToString(append(append(append([]byte(nil), noise...), secret...), noise...))
		case 3:
			enc = base64.RawURLEncoding.EncodeToString(append(append([]byte(nil), noise...), secret...))
		case 4:
			enc = hex.EncodeToString(secret)
		case 5:
			enc = url.QueryEscape(string(secret))
		case 6:
			enc = strings.ToUpper(hex.EncodeToString(secret))
		case 7:
			enc = string(secret) + string(noise)
		}
		pos := int(at) % (len(text) + 1)
		log := append(append(append([]byte(nil), text[:pos]...), enc...), text[pos:]...)
		sizes := []int{1 << 20}
		if len(chunks) > 0 {
			sizes = sizes[:0]
			for _, c := range chunks {
				sizes = append(sizes, int(c)*int(c)+1)
			}
		}
		out := streamMask(t, m, log, sizes)
		if f := leaks(m, out); f != "" {
			t.Fatalf("%q survives in %q", f, out[:min(len(out), 300)])
		}
	})
}

// BenchmarkMaskWriter streams a 16 MB log that mentions nothing secret
// through a masker of 20 secrets (a private key among them): the cost of
// masking every line of a followed log.
func BenchmarkMaskWriter(b *testing.B) {
	values := append([]string{}, testSecrets...)
	for i := range 17 {
		values = append(values, strings.Repeat(string(rune('a'+i)), 6)+"-secret-value-0123456789")
	}
	m := NewMasker(values...)
	log := bytes.Repeat([]byte("2026-12-01T08:00:00Z step 123 loss 0.4567 grad_norm 1.2 tokens/s 51234.5 lr 3e-4\n"), 16<<20/84)
	b.SetBytes(int64(len(log)))
	b.ReportAllocs()
	for b.Loop() {
		mw := m.NewWriter(io.Discard)
		for p := log; len(p) > 0; p = p[min(len(p), 32<<10):] {
			_, _ = mw.Write(p[:min(len(p), 32<<10)])
		}
		_ = mw.Close()
	}
}

func TestAProgressBarsCarriageReturnEndsItsLine(t *testing.T) {
	var out bytes.Buffer
	mw := NewMasker().NewWriter(&out)
	_, _ = mw.Write([]byte("\r 10%|#    |\r 20%|##   |\r 30%"))
	if got := out.String(); got != "\r 10%|#    |\r 20%|##   |\r" {
		t.Errorf("progress so far: %q, want every update that ended", got)
	}
}
