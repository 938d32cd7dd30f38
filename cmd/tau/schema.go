package main

import (
	"github.com/spf13/cobra"
	"github.com/taugrid/taugrid/render"
)

func newSchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "schema",
		Short:   "Print the JSON Schema of tau.yaml",
		Example: `  tau schema > tau.schema.json   # editors validate tau.yaml with it`,
		Long:    "Schema prints the JSON Schema (draft 2020-12) of tau.yaml v1, for editors and CI.",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(render.SchemaJSON())
			return err
		},
	}
}
