// Package filewatch keeps a value parsed from files and re-reads them when
// their contents change, without a restart and without a goroutine: the
// files are read again, at most once per interval, by the caller of Get
// that finds the interval passed (a TLS handshake, an authenticated call).
// A change that does not parse is reported and the last good value kept.
package filewatch

import (
	"crypto/sha256"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultInterval is how often, at most, Get reads the files again.
const DefaultInterval = 2 * time.Second

// Option configures a File.
type Option func(*options)

type options struct {
	now    func() time.Time
	every  time.Duration
	report func(err error)
}

// WithClock injects the clock that paces re-reads (default time.Now).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithInterval sets how often, at most, Get reads the files again
// (default DefaultInterval).
func WithInterval(d time.Duration) Option { return func(o *options) { o.every = d } }

// WithReport calls report after each re-read that found the files
// changed: with nil when the new contents were taken, with the error when
// they were rejected and the last good value kept. A rejected change is
// reported once, not at every re-read (default: nothing is reported).
func WithReport(report func(err error)) Option { return func(o *options) { o.report = report } }

// File is a value of type T parsed from the contents of one or more
// files. It is safe for concurrent use.
type File[T any] struct {
	paths []string
	parse func(contents [][]byte) (T, error)
	opts  options
	cur   atomic.Pointer[T]

	mu      sync.Mutex // guards the fields below; held while re-reading
	next    time.Time  // when Get reads the files again
	sum     [sha256.Size]byte
	lastErr string // last rejection reported, so it is reported once
}

// Load reads paths, parses their contents (in the order of paths) with
// parse and returns the File; an error if a file cannot be read or parse
// fails.
func Load[T any](parse func(contents [][]byte) (T, error), paths []string, opts ...Option) (*File[T], error) {
	f := &File[T]{paths: paths, parse: parse, opts: options{now: time.Now, every: DefaultInterval, report: func(error) {}}}
	for _, o := range opts {
		o(&f.opts)
	}
	contents, sum, err := f.read()
	if err != nil {
		return nil, err
	}
	v, err := parse(contents)
	if err != nil {
		return nil, err
	}
	f.cur.Store(&v)
	f.sum = sum
	f.next = f.opts.now().Add(f.opts.every)
	return f, nil
}

// Get returns the current value. When the interval has passed since the
// last read it first reads the files again, unless another caller is
// already doing so (then it returns the current value at once).
func (f *File[T]) Get() T {
	if f.mu.TryLock() {
		if now := f.opts.now(); !now.Before(f.next) {
			f.next = now.Add(f.opts.every)
			_ = f.reloadLocked()
		}
		f.mu.Unlock()
	}
	return *f.cur.Load()
}

// Reload reads the files now. It returns nil when they are unchanged or
// their new contents were taken, and the error (the last good value
// kept) when they could not be read or parsed.
func (f *File[T]) Reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reloadLocked()
}

func (f *File[T]) reloadLocked() error {
	contents, sum, err := f.read()
	if err == nil {
		if sum == f.sum {
			f.lastErr = ""
			return nil
		}
		var v T
		if v, err = f.parse(contents); err == nil {
			f.cur.Store(&v)
			f.sum, f.lastErr = sum, ""
			f.opts.report(nil)
			return nil
		}
	}
	err = fmt.Errorf("reload rejected, the previous contents stay in force: %w", err)
	if msg := err.Error(); msg != f.lastErr {
		f.lastErr = msg
		f.opts.report(err)
	}
	return err
}

// read returns the files' contents and one hash over all of them.
func (f *File[T]) read() ([][]byte, [sha256.Size]byte, error) {
	h := sha256.New()
	contents := make([][]byte, len(f.paths))
	for i, p := range f.paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, [sha256.Size]byte{}, err
		}
		contents[i] = b
		// Length first, so moving bytes between files changes the hash.
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	return contents, [sha256.Size]byte(h.Sum(nil)), nil
}
