// Package betatrust is a small trust model, and the example of an external
// policy plugin of a kind other than placement (examples/plugins/README.md):
// its main is one call, policyrpc.Serve(plugins.KindTrust, betatrust.New(),
// version).
//
// The model is the beta reputation rule (Jøsang and Ismail, 2002) with the
// prior chosen so that a site nobody has seen fail is fully trusted:
//
//	r = direct completions + W · witnessed completions
//	f = direct (failures + unreachable) + W · witnessed (failures + unreachable)
//	score = (r + 2) / (r + f + 2)
//
// "Direct" are the outcomes counted from the observer to the site,
// "witnessed" those counted from any other node to it, weighed by W
// (Witness, default 0.5). The score is 1 with no history or a clean
// record, falls toward 0 with every failure and never reaches it, as
// policy.Trust's contract asks. Decay halves every count each half-life
// (an exponential; a half-life <= 0 never ages).
//
// Pure and deterministic: the outcomes are read in sorted key order so that
// equal inputs give bit-equal scores, in process and through the plugin
// boundary alike.
package betatrust
