// Package imagebuild builds TauGrid's container images without a container
// engine or a base image from a registry: each image is the project's own
// binary, compiled with -trimpath, on a small root filesystem assembled here
// (a non-root user 65532, Debian's CA bundle, the directories the chart
// mounts, and glibc where the binary loads a library with dlopen). Every file
// time is the commit's time and every tar is written in sorted order, so two
// builds of one commit give the same digests. The images of all platforms
// form one OCI index per image, written as an OCI layout and an OCI archive,
// and the index digest is signed (cosign's simple-signing format) and given
// two in-toto statements, a SLSA provenance and an SPDX SBOM (hack/sbom),
// all stored beside it in the layout as cosign stores them in a registry.
package imagebuild
