package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// docsDir is where the reference is generated, from the repository root.
const docsDir = "docs/cli"

func newDocsCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "gen-docs [dir]",
		Short:  "Write the command reference as Markdown (default docs/cli)",
		Hidden: true,
		Args:   cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := docsDir
			if len(args) == 1 {
				dir = args[0]
			}
			return genDocs(dir)
		},
	}
}

// genDocs writes one Markdown page per command into dir, replacing the
// pages that are there. The pages do not depend on the environment: the
// tree is built with empty writers and no GRIDSUB_CONFIG.
func genDocs(dir string) error {
	old, _ := filepath.Glob(filepath.Join(dir, "gridsub*.md"))
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root := docRoot()
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		return fmt.Errorf("generating %s: %w", dir, err)
	}
	return nil
}

// docRoot is the command tree as the reference shows it.
func docRoot() *cobra.Command {
	saved, had := os.LookupEnv("GRIDSUB_CONFIG")
	os.Unsetenv("GRIDSUB_CONFIG") // the --config default must not leak into the docs
	root := newRoot(io.Discard, io.Discard)
	if had {
		os.Setenv("GRIDSUB_CONFIG", saved)
	}
	root.DisableAutoGenTag = true
	root.InitDefaultCompletionCmd()
	return root
}
