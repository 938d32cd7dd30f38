package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"strings"
	"time"

	"github.com/taugrid/taugrid/hack/sbom"
)

// DownloadURL is where a release's files are published: install.sh's
// default --base-url.
const DownloadURL = "https://github.com/taugrid/taugrid/releases/download"

// archiveSBOM is the SPDX SBOM of an archive (tau_<version>_<os>_<arch>.spdx.json):
// the archive's name and digest and the modules linked into bin, as its
// embedded build information lists them.
func archiveSBOM(version, archive string, data, bin []byte, created time.Time) (string, []byte, error) {
	info, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(data)
	a := sbom.Artifact{Name: "tau", Version: version, FileName: archive, SHA256: hex.EncodeToString(sum[:]),
		Purpose: "ARCHIVE", DownloadLocation: DownloadURL + "/" + version + "/" + archive, License: "MIT",
		Created: created, Go: sbom.FromBuildInfo(info, version)}
	var buf bytes.Buffer
	if err := sbom.Write(&buf, a); err != nil {
		return "", nil, err
	}
	base := strings.TrimSuffix(strings.TrimSuffix(archive, ".zip"), ".tar.gz")
	return base + ".spdx.json", buf.Bytes(), nil
}
