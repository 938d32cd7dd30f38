// Package server holds the controller's HTTP servers: the runs API that
// researchers' CLIs read, the source archives that runs' init containers
// fetch, and the webhook receivers that forges deliver to. Each reads the
// cluster through controller-runtime's client and the read side (package
// runs); none is a reconciler, and no reconciler depends on this package.
package server
