package ingest

func (s *Service) startConsole(served chan<- error) (func(), error) { return func() {}, nil }
