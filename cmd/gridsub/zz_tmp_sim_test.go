package main

import (
	"os"
	"testing"
)

func TestTmpSim(t *testing.T) {
	args := []string{"sim", os.Getenv("SIMFILE"), "--out", os.Getenv("SIMOUT")}
	root := newRoot(os.Stdout, os.Stderr)
	root.AddCommand(newSimCmd(&globals{stdout: os.Stdout, stderr: os.Stderr, output: "table"}))
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
}
