package history

import (
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Warm opens every table of the index and reads the blocks that locate a
// key in it (index and bloom filter), as the first queries after a
// restart would one table at a time: a restarted ingest answers its
// first calls from warm tables instead of paying a file open and two
// block reads per table inside them. It returns how many tables it
// opened. Ingest runs it right after Open, while the follower catches up.
func (s *Store) Warm() (int, error) {
	levels, err := s.db.SSTables()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, tables := range levels {
		for _, t := range tables {
			// An iterator bounded to the table's keys positions in it:
			// the table is opened and its index block read; a point
			// read then consults its filter.
			it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: t.Smallest.UserKey, UpperBound: append(slices.Clip(t.Largest.UserKey), 0)})
			if err != nil {
				return n, err
			}
			it.First()
			if err := it.Close(); err != nil {
				return n, err
			}
			if _, closer, err := s.db.Get(t.Largest.UserKey); err == nil {
				_ = closer.Close()
			}
			n++
		}
	}
	return n, nil
}
