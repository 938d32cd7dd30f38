package main

import "k8s.io/utils/clock"

// clk is the CLI's one clock. Ages, elapsed times, run IDs and resume
// requests read it, and the live view waits on it, so a test that sets it
// sees the same output on any date.
var clk clock.Clock = clock.RealClock{}
