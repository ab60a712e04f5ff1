package wire

import (
	"context"
	"errors"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/trust"
)

// The policy kinds' error kinds: the numbers of the protobuf enum
// PolicyErrorKind (policy_common.proto). Append only.
const (
	PolicyInternal       Kind = 1
	PolicyCanceled       Kind = 2
	PolicyDeadline       Kind = 3
	PolicyUnsupported    Kind = 4
	PolicyResvUnknown    Kind = 5
	PolicyResvBound      Kind = 6
	PolicyResvTooLate    Kind = 7
	PolicyResvNoResource Kind = 8
	PolicyTrustModel     Kind = 9
	PolicyTrustValue     Kind = 10
)

// PolicyCodec is the policy kinds' kind ↔ sentinel table (feasibility,
// admission, trust, tiering, remap): a test parses policy's var blocks and
// fails when a sentinel has no row, another holds it to the enum.
var PolicyCodec = NewCodec([]Row{
	{PolicyInternal, "INTERNAL", nil, ""},
	{PolicyCanceled, "CANCELED", context.Canceled, "context.Canceled"},
	{PolicyDeadline, "DEADLINE", context.DeadlineExceeded, "context.DeadlineExceeded"},
	{PolicyUnsupported, "UNSUPPORTED", errors.ErrUnsupported, "errors.ErrUnsupported"},
	{PolicyResvUnknown, "RESV_UNKNOWN", policy.ErrResvUnknown, "policy.ErrResvUnknown"},
	{PolicyResvBound, "RESV_BOUND", policy.ErrResvBound, "policy.ErrResvBound"},
	{PolicyResvTooLate, "RESV_TOO_LATE", policy.ErrResvTooLate, "policy.ErrResvTooLate"},
	{PolicyResvNoResource, "RESV_NO_RESOURCE", policy.ErrResvNoResource, "policy.ErrResvNoResource"},
	{PolicyTrustModel, "TRUST_MODEL", trust.ErrModel, "trust.ErrModel"},
	{PolicyTrustValue, "TRUST_VALUE", trust.ErrTrust, "trust.ErrTrust"},
})
