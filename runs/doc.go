// Package runs is TauGrid's read side: it finds runs by name, id or ref
// and names them, diagnoses a run, reads its pods' logs masked, reports a
// tenant's queues and explains why a run waits. It reads through
// controller-runtime's client.Reader and client-go only, so the CLI and
// the controller's runs API share it and the CLI links no controller code.
package runs
