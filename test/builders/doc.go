// Package builders makes the objects tests need, Kueue-style:
// MakeX(name, namespace).Option(...).Obj() gives a fresh object with only
// what the test says set, so a test reads as the case it covers.
package builders
