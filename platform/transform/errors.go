package transform

// Kind says why a run failed.
type Kind int

// Kinds of run failure.
const (
	// KindThrow: the handler threw, or the script errored.
	KindThrow Kind = iota + 1
	// KindTimeout: the run went over its time limit.
	KindTimeout
	// KindInvalidOutput: the handler returned something the webhook
	// cannot become (a reserved header, a refused url, a body too big).
	KindInvalidOutput
)

// String names k.
func (k Kind) String() string {
	switch k {
	case KindThrow:
		return "threw"
	case KindTimeout:
		return "timeout"
	case KindInvalidOutput:
		return "invalid output"
	}
	return "unknown"
}

// Error is why a run failed. Its message is meant for the endpoint's
// owner (results topic, dead letter, notice).
type Error struct {
	Kind Kind
	Msg  string
}

func (e *Error) Error() string { return "transformation " + e.Kind.String() + ": " + e.Msg }
