// Package celfilter compiles and evaluates endpoint content filters:
// CEL expressions (github.com/google/cel-go) over an event's type, JSON
// payload, metadata and ordering key, such as
// `payload.amount > 1000 && payload.currency == "EUR"`.
//
// A filter is type-checked and cost-estimated when it is compiled, and
// its evaluation is bounded by a cost limit. The event-type filter
// (platform/filter) is separate: it decides first, this one after.
package celfilter

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	hkafka "github.com/hookline/hookline/platform/kafka"
)

// Limits on a filter.
const (
	// MaxExpressionBytes is the longest filter accepted.
	MaxExpressionBytes = 4096
	// MaxEstimatedCost is the most a filter may cost in the worst case
	// its compiler estimates, in CEL cost units (about one per operation),
	// for a payload of EstimatePayloadBytes whose every list and string
	// is as long as it can be. One pass over a payload list fits;
	// a pass inside another does not.
	MaxEstimatedCost = 100_000_000
	// MaxCost is the most one evaluation may cost, in CEL cost units:
	// beyond it evaluation stops with an error (no match). Where the
	// estimated worst case for the event's payload size is within it,
	// the cost is not counted while the filter runs: the estimate
	// proves the bound.
	MaxCost = 100_000
	// EstimatePayloadBytes is the payload size the cost estimate assumes:
	// the largest --max-payload-bytes ingest accepts.
	EstimatePayloadBytes = hkafka.MaxRecordBytes / 2
	// interruptEvery is how many iterations of a comprehension run
	// between checks of the evaluation's context.
	interruptEvery = 100
)

// Variables a filter refers to.
const (
	VarType        = "type"
	VarPayload     = "payload"
	VarMetadata    = "metadata"
	VarOrderingKey = "ordering_key"
)

// metadataEntries and metadataValueBytes bound an event's metadata, for
// the cost estimate: the limits ingest enforces on
// PublishEventRequest.metadata.
const (
	metadataEntries    = 64
	metadataValueBytes = 1024
)

// Filter is a compiled content filter. It is safe for concurrent use.
type Filter struct {
	expr string
	// fast runs without counting its cost: used for payloads of at most
	// fastUpTo bytes, for which the estimated worst case is within
	// MaxCost. tracked counts its cost (MaxCost) and can be interrupted.
	fast, tracked cel.Program
	fastUpTo      int
}

// Expression returns the filter's source text.
func (f *Filter) Expression() string { return f.expr }

// environment is the one CEL environment every filter compiles in.
var environment = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable(VarType, cel.StringType),
		cel.Variable(VarPayload, cel.DynType),
		cel.Variable(VarMetadata, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(VarOrderingKey, cel.StringType),
		cel.ParserExpressionSizeLimit(MaxExpressionBytes),
	)
})

// CompileError says why an expression is not a filter: CEL's message,
// with the line and column of each problem, or the limit it exceeds.
type CompileError struct{ msg string }

func (e *CompileError) Error() string { return e.msg }

// Compile parses, type-checks and cost-estimates expr and returns it as
// a Filter. expr must evaluate to a bool (or to a dynamic value, which
// must be a bool when evaluated). Errors are *CompileError.
func Compile(expr string) (*Filter, error) {
	if len(expr) > MaxExpressionBytes {
		return nil, &CompileError{fmt.Sprintf("is %d bytes, the limit is %d", len(expr), MaxExpressionBytes)}
	}
	env, err := environment()
	if err != nil {
		return nil, fmt.Errorf("celfilter: environment: %w", err)
	}
	ast, iss := env.CompileSource(common.NewStringSource(expr, "filter"))
	if iss.Err() != nil {
		return nil, &CompileError{iss.Err().Error()}
	}
	if out := ast.OutputType(); !out.IsExactType(types.BoolType) && !out.IsExactType(types.DynType) {
		return nil, &CompileError{fmt.Sprintf("evaluates to %s; a filter must evaluate to a bool (true: deliver)", cel.FormatCELType(out))}
	}
	est, err := env.EstimateCost(ast, estimator{EstimatePayloadBytes})
	if err != nil {
		return nil, &CompileError{fmt.Sprintf("cost not estimated: %v", err)}
	}
	if est.Max > MaxEstimatedCost {
		return nil, &CompileError{fmt.Sprintf("its estimated worst-case cost (%d) is over the limit (%d) for a payload of %d bytes: iterate over payload lists at most once, not one inside another",
			est.Max, MaxEstimatedCost, EstimatePayloadBytes)}
	}
	f := &Filter{expr: expr}
	if f.fastUpTo, err = fastUpTo(env, ast, est); err != nil {
		return nil, &CompileError{fmt.Sprintf("cost not estimated: %v", err)}
	}
	if f.fast, err = env.Program(ast, cel.EvalOptions(cel.OptOptimize)); err != nil {
		return nil, &CompileError{err.Error()}
	}
	if f.tracked, err = env.Program(ast, cel.EvalOptions(cel.OptOptimize),
		cel.CostLimit(MaxCost), cel.InterruptCheckFrequency(interruptEvery)); err != nil {
		return nil, &CompileError{err.Error()}
	}
	return f, nil
}

// fastUpTo returns the largest payload size, a power of two from 1 KiB
// up to EstimatePayloadBytes, for which ast's estimated worst case
// (est at EstimatePayloadBytes) is within MaxCost; 0 if there is none.
func fastUpTo(env *cel.Env, ast *cel.Ast, est checker.CostEstimate) (int, error) {
	if est.Max <= MaxCost {
		return EstimatePayloadBytes, nil
	}
	best := 0
	for n := 1 << 10; n < EstimatePayloadBytes; n <<= 1 {
		e, err := env.EstimateCost(ast, estimator{n})
		if err != nil {
			return 0, err
		}
		if e.Max > MaxCost {
			break // the estimate only grows with the payload
		}
		best = n
	}
	return best, nil
}

// ErrNotBool is the error of a filter whose dynamic result is not a bool.
var ErrNotBool = errors.New("the filter did not evaluate to a bool")

// Match evaluates the filter against ev. An evaluation error (a missing
// field read without has(), a type mismatch, MaxCost exceeded, ctx
// ended while a comprehension ran) is returned with false: no match.
func (f *Filter) Match(ctx context.Context, ev *Event) (bool, error) {
	var (
		out ref.Val
		err error
	)
	if len(ev.Payload) <= f.fastUpTo {
		out, _, err = f.fast.Eval(ev.activation())
	} else {
		out, _, err = f.tracked.ContextEval(ctx, ev.activation())
	}
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("%w: it evaluated to %s", ErrNotBool, out.Type().TypeName())
	}
	return bool(b), nil
}

// estimator sizes what the checker cannot: anything read from a
// payload of payloadBytes is at most that long (a list of n elements
// takes more than n bytes), metadata is within its limits.
type estimator struct{ payloadBytes int }

func (e estimator) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if p := n.Path(); len(p) > 0 && p[0] == VarMetadata {
		if len(p) == 1 {
			return &checker.SizeEstimate{Min: 0, Max: metadataEntries}
		}
		return &checker.SizeEstimate{Min: 0, Max: metadataValueBytes}
	}
	return &checker.SizeEstimate{Min: 0, Max: uint64(e.payloadBytes)}
}

func (estimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}
