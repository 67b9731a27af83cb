package dispatcher

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/dispatcher/attempt"
)

// An answer journal keeps the receivers' 2xx answers (answered.go) in a
// directory, so that a dispatcher killed before their settlements
// committed and started again on the same directory settles the
// records it fetches again from those answers instead of POSTing them
// once more.
//
// A settlement commits in a transaction that, on a loaded three-broker
// cluster, takes 0.5-2 s; what the receivers answered since the last
// commit that landed began is what a kill -9 re-POSTs (docs/DESIGN.md,
// "What a crash, a rebalance or an outage re-POSTs"). The chaos storm's
// kill -9 re-POSTed 43-70 deliveries so (docs/reliability.md, "The
// storm row, attributed"). With static group membership (the restarted
// process takes its partitions back) and a directory that outlives the
// process (a StatefulSet's volume, an emptyDir across container
// restarts), those answers survive the crash.
//
// Each answer is one JSON line appended with write(2) when it arrives:
// the page cache keeps it across a crash of the process; a crash of the
// machine may lose the last ones, which are then POSTed again (as they
// were before the journal). No fsync, so the cost is a system call per
// answer. A line torn by the crash is skipped when the journal is read.
//
// Segments: lines go to answers-<n>.log until it passes
// journalSegmentBytes, then to the next. A segment other than the one
// written is removed once none of its answers is held (each leaves when
// its settlement commits, when a newer answer to its record replaces
// it, when the memory bound drops it, or when the committed offsets read
// at an assignment show it committed). One process at a time: the
// directory is locked (flock) while open.

// journalSegmentBytes is the size after which the journal starts a new
// segment.
const journalSegmentBytes = 8 << 20

// journalLine is one answer as written.
type journalLine struct {
	Partition  int32  `json:"p"`
	Offset     int64  `json:"o"`
	Delivery   string `json:"d"`
	Attempt    uint32 `json:"a"`
	URL        string `json:"u"`
	Class      int32  `json:"c"`
	Status     int    `json:"s"`
	Started    int64  `json:"t"` // Unix nanoseconds
	Latency    int64  `json:"l"` // nanoseconds
	Excerpt    []byte `json:"x,omitempty"`
	RetryAfter string `json:"r,omitempty"`
}

// answerJournal is the directory's open state. Safe for concurrent use.
type answerJournal struct {
	dir  string
	lock *os.File

	mu   sync.Mutex
	cur  *os.File
	seg  int         // the segment written
	size int64       // its bytes
	live map[int]int // answers held, by segment
	max  int64       // segment size after which the next starts
	err  error       // the first write error; the journal stops writing

	onErr func(error) // told of the first write error
}

// journaled is an answer read from the journal.
type journaled struct {
	key answerKey
	url string
	ar  attempt.Result
	seg int
}

// openAnswerJournal locks dir (made if missing), reads the answers its
// segments hold, oldest first, and starts a new segment.
func openAnswerJournal(dir string) (*answerJournal, []journaled, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("answers dir: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("answers dir: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = lock.Close()
		return nil, nil, fmt.Errorf("answers dir %s is in use by another dispatcher (each needs its own): %w", dir, err)
	}
	j := &answerJournal{dir: dir, lock: lock, live: map[int]int{}, max: journalSegmentBytes}
	segs, err := j.segments()
	if err != nil {
		j.close()
		return nil, nil, err
	}
	var read []journaled
	for _, n := range segs {
		got, err := readSegment(j.path(n), n)
		if err != nil {
			j.close()
			return nil, nil, err
		}
		read = append(read, got...)
		j.live[n] = 0 // answered.attach counts what it holds
	}
	next := 1
	if len(segs) > 0 {
		next = segs[len(segs)-1] + 1
	}
	if err := j.start(next); err != nil {
		j.close()
		return nil, nil, err
	}
	return j, read, nil
}

// segments lists the segment numbers in dir, ascending.
func (j *answerJournal) segments() ([]int, error) {
	ents, err := os.ReadDir(j.dir)
	if err != nil {
		return nil, fmt.Errorf("answers dir: %w", err)
	}
	var segs []int
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "answers-") || !strings.HasSuffix(name, ".log") {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, "answers-"), ".log"))
		if err == nil && n > 0 {
			segs = append(segs, n)
		}
	}
	slices.Sort(segs)
	return segs, nil
}

func (j *answerJournal) path(n int) string {
	return filepath.Join(j.dir, fmt.Sprintf("answers-%08d.log", n))
}

// readSegment reads the answers of segment n at path. A line that does
// not decode (torn by a crash) is skipped.
func readSegment(path string, n int) ([]journaled, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("answers dir: %w", err)
	}
	defer f.Close()
	var out []journaled
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, nil // a last line without its newline was torn
		}
		if err != nil {
			return nil, fmt.Errorf("answers dir: %s: %w", path, err)
		}
		var l journalLine
		if json.Unmarshal(line, &l) != nil || l.Delivery == "" {
			continue
		}
		out = append(out, journaled{
			key: answerKey{partition: l.Partition, offset: l.Offset, delivery: l.Delivery, attempt: l.Attempt},
			url: l.URL,
			ar: attempt.Result{
				Class:      hooklinev1.OutcomeClass(l.Class),
				StatusCode: l.Status,
				Started:    time.Unix(0, l.Started),
				Latency:    time.Duration(l.Latency),
				Excerpt:    l.Excerpt,
				RetryAfter: l.RetryAfter,
			},
			seg: n,
		})
	}
}

// start opens segment n for appending. With j.mu held or before use.
func (j *answerJournal) start(n int) error {
	f, err := os.OpenFile(j.path(n), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("answers dir: %w", err)
	}
	if j.cur != nil {
		_ = j.cur.Close()
		old := j.seg
		if j.live[old] == 0 {
			j.remove(old)
		}
	}
	j.cur, j.seg, j.size = f, n, 0
	j.live[n] += 0
	return nil
}

// write appends the answer to key and returns the segment that holds
// it (0: not written; the answer is held in memory only).
func (j *answerJournal) write(key answerKey, url string, ar attempt.Result) int {
	line, err := json.Marshal(journalLine{
		Partition: key.partition, Offset: key.offset, Delivery: key.delivery, Attempt: key.attempt, URL: url,
		Class: int32(ar.Class), Status: ar.StatusCode, Started: ar.Started.UnixNano(), Latency: int64(ar.Latency),
		Excerpt: ar.Excerpt, RetryAfter: ar.RetryAfter,
	})
	if err != nil {
		return 0
	}
	line = append(line, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cur == nil || j.err != nil {
		return 0
	}
	if j.size > 0 && j.size+int64(len(line)) > j.max {
		if err := j.start(j.seg + 1); err != nil {
			j.fail(err)
			return 0
		}
	}
	n, err := j.cur.Write(line)
	j.size += int64(n)
	if err != nil {
		j.fail(err)
		return 0
	}
	j.live[j.seg]++
	return j.seg
}

// fail stops writing after err. With j.mu held.
func (j *answerJournal) fail(err error) {
	j.err = err
	if j.onErr != nil {
		go j.onErr(err) // not under j.mu
	}
}

// release counts an answer of segment seg as no longer held; a segment
// not written any more is removed once it holds none.
func (j *answerJournal) release(seg int) {
	if seg == 0 {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.live[seg]--
	if j.live[seg] <= 0 && seg != j.seg {
		j.remove(seg)
	}
}

// remove deletes segment n. With j.mu held.
func (j *answerJournal) remove(n int) {
	delete(j.live, n)
	_ = os.Remove(j.path(n))
}

// close closes the segment written and unlocks the directory.
func (j *answerJournal) close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cur != nil {
		_ = j.cur.Close()
		j.cur = nil
	}
	if j.lock != nil {
		_ = j.lock.Close() // releases the flock
		j.lock = nil
	}
}
