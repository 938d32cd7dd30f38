// Command tau is the researcher's command line: validate and render tau.yaml
// offline, and (later) start and follow runs with nothing but git.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd(os.Stdout, os.Stderr).Execute(); err != nil {
		if !isReported(err) {
			fmt.Fprintln(os.Stderr, "tau:", err)
		}
		os.Exit(1)
	}
}
