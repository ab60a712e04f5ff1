package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	"github.com/gridsub/gridsub/bridge/plugins/policyrpc"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/registry"
)

// policyKind is one policy extension point as the CLI serves and lists it:
// its built-ins by name.
type policyKind struct {
	kind   string
	names  func() []string
	byName func(string) (any, error)
}

// policyKinds are the seven policy extension points, placement first: their
// built-ins' names from policy/registry, each built by the plugin catalog.
func policyKinds() []policyKind {
	kinds := []struct {
		cli, catalog string
		reg          policy.Kind
	}{
		{plugins.KindPlacement, plugins.KindPlanner, policy.KindPlanner},
		{plugins.KindFeasibility, plugins.KindFeasibility, policy.KindFeasibility},
		{plugins.KindAdmission, plugins.KindAdmission, policy.KindAdmission},
		{plugins.KindTrust, plugins.KindTrust, policy.KindTrust},
		{plugins.KindTiering, plugins.KindTiering, policy.KindTiering},
		{plugins.KindRemap, plugins.KindRemap, policy.KindRemap},
		{plugins.KindOrder, plugins.KindOrder, policy.KindOrder},
	}
	out := make([]policyKind, len(kinds))
	for i, k := range kinds {
		out[i] = policyKind{kind: k.cli, names: func() []string { return registry.NamesOf(k.reg) },
			// the catalog's built-ins, as every policy is built
			byName: func(n string) (any, error) { return plugins.BuiltinPolicy(k.catalog, n, plugins.PolicyInput{}) }}
	}
	return out
}

// addPolicyServeCmds adds `gridsub plugin serve KIND NAME` for the six
// policy kinds beside placement to serve, and `placement` as another name
// of its `planner`.
func addPolicyServeCmds(serve *cobra.Command) {
	for _, c := range serve.Commands() {
		if c.Name() == "planner" {
			c.Aliases = append(c.Aliases, plugins.KindPlacement)
			c.Short += " (the placement policy; also: serve placement NAME)"
		}
	}
	serve.AddCommand(servePolicyCmds()...)
}

// servePolicyCmds are `gridsub plugin serve KIND NAME` for the six
// policy kinds beside placement (served by `serve planner`).
func servePolicyCmds() []*cobra.Command {
	var out []*cobra.Command
	for _, k := range policyKinds() {
		if k.kind == plugins.KindPlacement {
			continue
		}
		out = append(out, &cobra.Command{
			Use:       k.kind + " NAME",
			Short:     "Serve the built-in " + k.kind + " policy NAME (" + orNone(k.names()) + ")",
			Args:      cobra.ExactArgs(1),
			ValidArgs: k.names(),
			RunE: func(_ *cobra.Command, args []string) error {
				impl, err := k.byName(args[0])
				if err != nil {
					return usageErr(fmt.Errorf("%w: %w", plugins.ErrUnknownPlugin, err))
				}
				return policyrpc.Serve(k.kind, impl, plugins.Version())
			},
		})
	}
	return out
}

func orNone(v []string) string {
	if len(v) == 0 {
		return "none yet"
	}
	return strings.Join(v, ", ")
}

// kindListing is one policy kind in `gridsub plugins --builtins`.
type kindListing struct {
	Kind     string   `json:"kind"`
	Builtins []string `json:"builtins"`
	// Serve is how gridsub runs one of them out of process.
	Serve string `json:"serve"`
	// Ref is how a configuration names one run out of process
	// (broker.policy, broker.trust, ...: plugin:builtin:NAME).
	Ref string `json:"ref,omitempty"`
}

func kindListings() []kindListing {
	var out []kindListing
	for _, k := range policyKinds() {
		l := kindListing{Kind: k.kind, Builtins: k.names(), Serve: "gridsub plugin serve " + k.kind + " NAME",
			Ref: plannerrpc.RefPrefix + "builtin:NAME"}
		if l.Builtins == nil {
			l.Builtins = []string{}
		}
		if k.kind == plugins.KindPlacement {
			l.Serve = "gridsub plugin serve planner NAME"
		}
		out = append(out, l)
	}
	return out
}

// writeKinds prints the policy kinds and their built-ins.
func writeKinds(w io.Writer, asJSON bool) error {
	rows := kindListings()
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	return writeKindsTable(w, nil)
}

// writeKindsTable prints the policy kinds and their built-ins, with what
// configured (by kind) chose for each when it is not nil.
func writeKindsTable(w io.Writer, configured map[string]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if configured == nil {
		fmt.Fprintln(tw, "POLICY KIND\tOUT OF PROCESS\tBUILT-INS")
	} else {
		fmt.Fprintln(tw, "POLICY KIND\tCONFIGURED\tOUT OF PROCESS\tBUILT-INS")
	}
	for _, r := range kindListings() {
		if configured == nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Kind, r.Serve, orNone(r.Builtins))
			continue
		}
		c := configured[r.Kind]
		if c == "" {
			c = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Kind, c, r.Serve, orNone(r.Builtins))
	}
	return tw.Flush()
}
