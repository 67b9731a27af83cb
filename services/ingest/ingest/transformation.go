package ingest

// validateTransformation compiles an endpoint's transformation (empty:
// none) and keeps it compiled, by the hash of its source, for the
// fan-outs that will run it. Every error Compile returns is the
// author's: a script over transform.MaxScriptBytes, one that does not
// compile (goja's message and position), one whose top level throws or
// runs over the time limit, one that defines no handler. They are
// INVALID_ARGUMENT.
func (s *Service) validateTransformation(src string) error {
	if src == "" {
		return nil
	}
	if _, err := s.transforms.Get(src); err != nil {
		return invalid("transformation", "%v", err)
	}
	return nil
}
