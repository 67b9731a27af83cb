// Package history is ingest's delivery history: a Pebble index of every
// delivery, event and attempt the deliveries, results and dead-letter
// topics hold, on disk under a data directory. It is a view, never a
// second truth: it is materialised from those topics (Writer.Apply), it
// stores with each batch the topic offsets that batch reached (Offsets),
// so a restart resumes there, and deleting its directory rebuilds it from
// the topics with the same answers. Entries older than the topics'
// retention are deleted (Writer.Sweep). Reads (Reader, query.go) are
// served from disk through a bounded block cache, so memory does not grow
// with history.
//
// A Store (store.go) is the open database and its directory; over the
// same database it holds the write side, Writer (materialise.go,
// retention.go; a batch's changes to the held bytes, heldDelta, in
// heldbytes.go), and the read side, Reader (query.go, Unended in
// heldbytes.go). Keys are laid out in keys.go, values in slim.go.
package history

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	hkafka "github.com/hookline/hookline/platform/kafka"
)

// Topics names the topics the index is materialised from.
type Topics struct {
	Deliveries, Results, Dead string
}

// Store is the on-disk index: the Pebble database under its directory,
// with its write side (Writer: Apply and Sweep write, one at a time) and
// its read side (Reader: every read is safe for concurrent use with them
// and with each other).
type Store struct {
	db     *pebble.DB
	dir    string
	temp   bool // dir was made by Open and is removed by Close
	writer *Writer
	reader *Reader
}

// Option configures Open.
type Option func(*options)

type options struct {
	cacheBytes    int64
	memtableBytes uint64
	log           *slog.Logger
	// noTableStats keeps Pebble from loading table statistics in the
	// background after open (which opens tables): tests that count open
	// tables set it.
	noTableStats bool
}

// WithCacheBytes sets the block cache (default 32 MiB): what reads keep
// in memory, whatever the history's size.
func WithCacheBytes(n int64) Option { return func(o *options) { o.cacheBytes = n } }

// WithMemtableBytes sets the size of one memtable (default 8 MiB; at
// most two are held before writes wait for a flush).
func WithMemtableBytes(n uint64) Option { return func(o *options) { o.memtableBytes = n } }

// WithLogger sets where Pebble's own messages go (default slog.Default,
// at debug level).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// Open opens (creating if needed) the index under dir. An empty dir
// means a fresh temporary directory, removed by Close: the index is then
// rebuilt from the topics at every start. Temporary directories left by
// processes no longer alive (kill -9) are removed first. Only one process may hold a
// directory at a time (Pebble locks it).
func Open(dir string, topics Topics, opts ...Option) (*Store, error) {
	o := options{cacheBytes: 32 << 20, memtableBytes: 8 << 20, log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	temp := dir == ""
	if temp {
		d, err := makeTempDir("")
		if err != nil {
			return nil, errTemp(err)
		}
		dir = d
	}
	cache := pebble.NewCache(o.cacheBytes)
	defer cache.Unref() // the DB holds its own reference
	popts := &pebble.Options{
		Cache:                       cache,
		MemTableSize:                o.memtableBytes,
		MemTableStopWritesThreshold: 2,
		MaxOpenFiles:                256,
		Logger:                      pebbleLogger{o.log},
		// No write-ahead log: the index is a view of the topics, and every
		// batch carries the offsets it reached, so a crash loses the
		// unflushed memtables and their offsets together, and the
		// follower reads those records again (applying one twice changes
		// nothing). Close flushes first. Writes then cost no log I/O.
		DisableWAL: true,
		// Table statistics guide compactions of deleted ranges (the
		// retention sweep); only tests turn them off.
		DisableTableStats: o.noTableStats,
		// Compactions were the largest single cost of a publish in
		// `hookline dev` (30% of the process's CPU at fan-out 10, more
		// than the dispatcher): every delivery writes about ten keys, and
		// with Pebble's default of 4 L0 files before an L0 compaction,
		// the base level was rewritten every few flushes. Eight (and a
		// write stall only at 24) halves how often; reads look at a few
		// more L0 sublevels, each behind its bloom filter.
		L0CompactionThreshold: 8,
		L0StopWritesThreshold: 24,
	}
	// Applying a record looks its delivery up first, and most look-ups
	// are of deliveries not seen yet: bloom filters answer those without
	// reading a block.
	for i := range popts.Levels {
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, popts)
	if err != nil {
		if temp {
			_ = os.RemoveAll(dir)
		}
		return nil, fmt.Errorf("history: open index in %s: %w", dir, err)
	}
	if err := keepFormat(db, o.log); err != nil {
		_ = db.Close()
		if temp {
			_ = os.RemoveAll(dir)
		}
		return nil, fmt.Errorf("history: index in %s: %w", dir, err)
	}
	return &Store{
		db: db, dir: dir, temp: temp,
		writer: &Writer{db: db, topics: topics, maxBatch: maxBatchBytes},
		reader: &Reader{db: db, topics: topics, maxScan: MaxScan},
	}, nil
}

// keepFormat makes db an index of formatVersion: a new one is marked so;
// one of another format (or of the first, which stored none) is emptied
// (its offsets with it), so the follower reads the topics again from
// their start and rebuilds it, as it would a deleted directory. Only
// the index's own keys go: the directory may hold other files.
func keepFormat(db *pebble.DB, log *slog.Logger) error {
	want := binary.BigEndian.AppendUint64(nil, formatVersion)
	v, closer, err := db.Get([]byte(tagFormat))
	switch {
	case err == nil:
		same := bytes.Equal(v, want)
		stored := fmt.Sprintf("%x", v)
		if len(v) == 8 {
			stored = fmt.Sprint(binary.BigEndian.Uint64(v))
		}
		_ = closer.Close()
		if same {
			return nil
		}
		log.Warn("history: the index has another format; rebuilding it from the topics", "format", formatVersion, "stored", stored)
	case errors.Is(err, pebble.ErrNotFound):
		empty, err := isEmpty(db)
		if err != nil {
			return err
		}
		if empty {
			return db.Set([]byte(tagFormat), want, pebble.NoSync)
		}
		log.Warn("history: the index has the first format; rebuilding it from the topics", "format", formatVersion)
	default:
		return err
	}
	// Without a write-ahead log (Open) the change lasts once flushed; a
	// crash before that finds the old index again and starts over.
	b := db.NewBatch()
	defer b.Close()
	if err := errors.Join(b.DeleteRange([]byte{0}, []byte{0xff}, nil), b.Set([]byte(tagFormat), want, nil)); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	return db.Flush()
}

func isEmpty(db *pebble.DB) (bool, error) {
	it, err := db.NewIter(nil)
	if err != nil {
		return false, err
	}
	empty := !it.First()
	return empty, errors.Join(it.Error(), it.Close())
}

// Dir returns the directory the index lives in.
func (s *Store) Dir() string { return s.dir }

// Writer returns the index's write side: Apply and Sweep.
func (s *Store) Writer() *Writer { return s.writer }

// Reader returns the index's read side: the queries.
func (s *Store) Reader() *Reader { return s.reader }

// Close closes the index (and removes it if Open made it temporary).
// Nothing may use the Store, its Writer or its Reader after.
func (s *Store) Close() error {
	if s.temp {
		// A temporary index is deleted right away: flushing it would be
		// wasted I/O. (It also keeps pebble's table writer, whose pooled
		// write tasks hold channels, out of the e2e suite's synctest
		// bubbles: a task made in one bubble and used in another is a
		// fatal error.)
		return errors.Join(s.db.Close(), os.RemoveAll(s.dir))
	}
	return errors.Join(s.db.Flush(), s.db.Close())
}

// Offsets returns, per topic and partition, the next offset to read:
// where the last applied batch ended.
func (s *Store) Offsets() (hkafka.Offsets, error) { return storedOffsets(s.db) }

// storedOffsets reads db's offsets (Offsets).
func storedOffsets(db *pebble.DB) (hkafka.Offsets, error) {
	lo := []byte(tagOffset + "\x00")
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
	if err != nil {
		return nil, fmt.Errorf("history: offsets: %w", err)
	}
	defer it.Close()
	out := hkafka.Offsets{}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) < len(lo)+5 || len(it.Value()) != 8 {
			return nil, fmt.Errorf("history: offsets: malformed key %q", k)
		}
		topic := string(k[len(lo) : len(k)-5])
		p := int32(binary.BigEndian.Uint32(k[len(k)-4:]))
		if out[topic] == nil {
			out[topic] = map[int32]int64{}
		}
		out[topic][p] = int64(binary.BigEndian.Uint64(it.Value()))
	}
	return out, it.Error()
}

// DiskBytes returns the index's size on disk.
func (s *Store) DiskBytes() uint64 {
	return s.db.Metrics().DiskSpaceUsage()
}

// pebbleLogger sends Pebble's messages to slog; Fatalf panics, as
// Pebble's own default does after logging.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("history: pebble: " + fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("history: pebble: " + fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error("history: pebble: " + msg)
	panic(msg)
}
