package wire

import "errors"

// Codec is one kind ↔ sentinel table: the backend protocol's is Table (the
// package-level KindsOf, Sentinels and Decode use it); each further
// protocol with its own error enum (the policy kinds') has its own Codec,
// built once from its rows. Rows are in number order from 1 with no gaps,
// and exactly one row has no sentinel: INTERNAL, what an error matching no
// sentinel is sent as.
type Codec struct {
	rows     []Row
	internal Kind
}

// NewCodec checks rows (number order, no gaps, one INTERNAL) and returns
// their codec; it panics on a malformed table, which is a programming error
// caught by the first test that builds it.
func NewCodec(rows []Row) *Codec {
	c := &Codec{rows: rows}
	for i, r := range rows {
		if int(r.Kind) != i+1 {
			panic("wire: codec row " + r.Name + " out of number order")
		}
		if r.Sentinel == nil {
			if c.internal != 0 {
				panic("wire: codec has two rows without a sentinel")
			}
			c.internal = r.Kind
		}
	}
	if c.internal == 0 {
		panic("wire: codec has no INTERNAL row")
	}
	return c
}

// Rows are the codec's rows, in number order (do not modify them).
func (c *Codec) Rows() []Row { return c.rows }

// KindsOf returns every kind whose sentinel err matches (errors.Is), in
// table order; an error matching none is INTERNAL. nil has no kinds.
func (c *Codec) KindsOf(err error) []Kind {
	if err == nil {
		return nil
	}
	var out []Kind
	for _, r := range c.rows {
		if r.Sentinel != nil && errors.Is(err, r.Sentinel) {
			out = append(out, r.Kind)
		}
	}
	if len(out) == 0 {
		out = append(out, c.internal)
	}
	return out
}

// Sentinels returns the sentinels of kinds, skipping INTERNAL and kinds
// this build does not know (a newer plugin's).
func (c *Codec) Sentinels(kinds []Kind) []error {
	var out []error
	for _, k := range kinds {
		if k >= 1 && int(k) <= len(c.rows) && c.rows[k-1].Sentinel != nil {
			out = append(out, c.rows[k-1].Sentinel)
		}
	}
	return out
}

// Decode is the client's side of a reply's error: nil when kinds is empty
// and msg is "", else a *RemoteError unwrapping to the sentinels of kinds
// in this codec.
func (c *Codec) Decode(plugin, method string, kinds []Kind, msg string) error {
	if len(kinds) == 0 && msg == "" {
		return nil
	}
	if len(kinds) == 0 {
		kinds = []Kind{c.internal}
	}
	return &RemoteError{Plugin: plugin, Method: method, Msg: msg, Kinds: kinds, codec: c}
}
