package logstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	walfs "github.com/hashicorp/raft-wal/fs"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
	"go.etcd.io/bbolt"
)

// MetaFile is raft-wal's metadata database in the store's directory: the
// list of segment files and the stable store's values (term and vote).
const MetaFile = metadb.FileName

// ErrDamaged reports a store whose content cannot be trusted; errors that
// wrap it are *DamageError values naming the file.
var ErrDamaged = errors.New("log store damaged")

// ErrLocked reports a store another process has open.
var ErrLocked = errors.New("log store locked by another process")

// DamageError names the file of the store that is damaged and why.
type DamageError struct {
	Path string
	Err  error
}

func (e *DamageError) Error() string      { return e.Path + ": " + e.Err.Error() }
func (e *DamageError) Unwrap() error      { return e.Err }
func (e *DamageError) Is(t error) bool    { return t == ErrDamaged }
func damage(path string, err error) error { return accessOr(&DamageError{Path: path, Err: err}) }

// accessOr returns a permission or read-only file system error as it is:
// it says nothing about damage, and the caller gives the fix for it.
func accessOr(err error) error {
	var d *DamageError
	if errors.As(err, &d) && isAccess(d.Err) {
		return d.Err
	}
	return err
}

func isAccess(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}

// Options configure a store.
type Options struct {
	// SegmentSize is the size of one segment file; 0 is raft-wal's default
	// (64 MiB). Tests use small segments to have sealed ones.
	SegmentSize int
	// Logger receives raft-wal's own messages; nil discards them.
	Logger hclog.Logger

	markEvery time.Duration // tests: how often the high-water mark is recorded
}

// TailCut says what Open cut from a torn last segment: Bytes written after
// the last batch that was fsynced whole, in File. LastIndex is the last
// entry kept.
type TailCut struct {
	File      string
	Bytes     int64
	LastIndex uint64
}

// Store is a Raft log store and stable store (raft.LogStore and
// raft.StableStore). Every append is one write and one fsync.
type Store struct {
	dir  string
	opts Options

	// mu guards w and meta: after a failed write (a full disk) raft-wal's
	// in-memory state can disagree with its files (a failed segment
	// rotation leaves it refusing every append), so the next write opens
	// the store again first, with every check of Open.
	mu     sync.RWMutex
	w      *wal.WAL
	meta   *metadb.BoltMetaDB
	broken atomic.Bool

	// The high-water mark: the last index known fsynced (synced), and what
	// was last recorded of it in the metadata file (marked, under markMu).
	// Recording it costs an fsync of the metadata, so it is done once a
	// second off the append path (markLoop), and at once before a suffix is
	// deleted. Open refuses a log that ends before the recorded mark: its
	// end was lost after it was synced (a truncated file), which raft-wal
	// alone would take for a torn write.
	synced   atomic.Uint64
	markMu   sync.Mutex
	marked   uint64
	stopMark chan struct{}
	markDone chan struct{}

	// Cut is what Open cut from a torn tail (zero when nothing was).
	Cut TailCut
}

// Exists reports whether dir holds a store (its metadata file).
func Exists(dir string) bool {
	info, err := os.Stat(filepath.Join(dir, MetaFile))
	return err == nil && info.Size() > 0
}

// Open opens (or creates) the store in dir after checking it: the
// metadata must read, every segment it lists must be there, the last
// segment's torn tail (if any) is cut back to the last batch that was
// fsynced whole, and every entry is read back and checked against its
// checksum. Damage is a *DamageError (errors.Is ErrDamaged) naming the
// file; another process holding the store is ErrLocked.
func Open(dir string, opts Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	s := &Store{dir: dir, opts: opts, stopMark: make(chan struct{}), markDone: make(chan struct{})}
	if err := s.open(); err != nil {
		return nil, err
	}
	go s.markLoop()
	return s, nil
}

// syncedKey is the stable-store key of the high-water mark.
var syncedKey = []byte("TicketingSyncedIndex")

// markEvery is how often the high-water mark is recorded.
const markEvery = time.Second

func (s *Store) markLoop() {
	defer close(s.markDone)
	every := markEvery
	if s.opts.markEvery > 0 {
		every = s.opts.markEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stopMark:
			return
		case <-t.C:
			s.recordMark()
		}
	}
}

func (s *Store) recordMark() {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.markMu.Lock()
	defer s.markMu.Unlock()
	if v := s.synced.Load(); v != s.marked && !s.broken.Load() {
		if s.w.SetUint64(syncedKey, v) == nil {
			s.marked = v
		}
	}
}

func (s *Store) open() (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = damage(s.dir, fmt.Errorf("reading it failed: %v", r))
		}
	}()
	meta, err := readMeta(s.dir)
	if err != nil {
		return err
	}
	if err := s.checkSegments(meta); err != nil {
		return err
	}
	logger := s.opts.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	size := s.opts.SegmentSize
	if size <= 0 {
		size = wal.DefaultSegmentSize
	}
	// raft-wal's Close leaves the metadata database open (and locked):
	// the store closes it itself.
	s.meta = &metadb.BoltMetaDB{}
	s.w, err = wal.Open(s.dir, wal.WithLogger(logger), wal.WithSegmentSize(size), wal.WithMetaStore(createdMeta{s.meta, s.dir}),
		wal.WithSegmentFiler(segment.NewFiler(s.dir, segmentFS{walfs.New()})))
	if err != nil {
		_ = s.meta.Close()
		return damage(s.dir, err)
	}
	if err := s.verify(meta); err != nil {
		_ = s.closeFiles()
		return err
	}
	return nil
}

// segmentFS creates segment files for raft-wal. A file may already exist,
// empty: createdMeta made it before the metadata that lists it was
// committed. It is preallocated when the file system can (not when it is
// full, or too small for a whole segment: appends then go on while there
// is room).
type segmentFS struct{ *walfs.FS }

func (segmentFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return nil, err
	}
	if info, err := f.Stat(); err != nil || info.Size() != 0 {
		_ = f.Close()
		return nil, fmt.Errorf("create segment %s: it exists and is not empty", path)
	}
	if size > 0 {
		preallocate(f, int64(size))
	}
	return &segmentFile{File: f, dir: dir}, nil
}

// segmentFile syncs its directory too the first time it is synced, so that
// the file's name is as durable as the entries in it.
type segmentFile struct {
	*os.File
	dir    string
	synced atomic.Bool
}

func (f *segmentFile) Sync() error {
	if err := f.File.Sync(); err != nil {
		return err
	}
	if !f.synced.Swap(true) {
		return syncDir(f.dir)
	}
	return nil
}

// createdMeta is raft-wal's metadata database, except that it creates a
// new last segment's file (empty, durably) before committing the metadata
// that lists it; raft-wal creates it after. So a listed segment whose file
// is missing is always damage: otherwise a stop between the two would
// look the same as a last segment that was lost with its entries.
type createdMeta struct {
	*metadb.BoltMetaDB
	dir string
}

func (m createdMeta) CommitState(st types.PersistentState) error {
	if n := len(st.Segments); n > 0 && st.Segments[n-1].SealTime.IsZero() {
		path := filepath.Join(m.dir, segment.FileName(st.Segments[n-1]))
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o640)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = syncDir(m.dir)
		}
		if err != nil {
			return err
		}
	}
	return m.BoltMetaDB.CommitState(st)
}

// storedMeta is what the metadata file says, read before raft-wal opens it.
type storedMeta struct {
	types.PersistentState
	present bool // the file exists
}

// readMeta reads the metadata file read-only, after checking that it is as
// long as its own pages say (a truncated memory-mapped file would crash the
// process with SIGBUS when a missing page is read).
func readMeta(dir string) (m storedMeta, err error) {
	path := filepath.Join(dir, MetaFile)
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, err
	}
	m.present = true
	if info.Size() == 0 {
		return m, damage(path, errors.New("the file is empty"))
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
	if errors.Is(err, bbolt.ErrTimeout) {
		return m, fmt.Errorf("%w: %s (is another ticketd using this data directory?)", ErrLocked, path)
	}
	if err != nil {
		return m, damage(path, err)
	}
	defer func() { _ = db.Close() }()
	err = db.View(func(tx *bbolt.Tx) error {
		if info.Size() < tx.Size() {
			return fmt.Errorf("the file is %d bytes but its pages reach %d: it was truncated", info.Size(), tx.Size())
		}
		mb, sb := tx.Bucket([]byte(metadb.MetaBucket)), tx.Bucket([]byte(metadb.StableBucket))
		if mb == nil || sb == nil {
			return errors.New("its buckets are missing")
		}
		if raw := mb.Get([]byte(metadb.MetaKey)); raw != nil {
			if err := json.Unmarshal(raw, &m.PersistentState); err != nil {
				return fmt.Errorf("the segment list does not decode: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return m, damage(path, err)
	}
	return m, nil
}

func (s *Store) segmentPath(si types.SegmentInfo) string {
	return filepath.Join(s.dir, segment.FileName(si))
}

// checkSegments checks what raft-wal would take silently: a metadata file
// that is gone while segments remain (raft-wal would start an empty log and
// delete them), a listed segment that is missing (it would recreate the last
// one empty), and damage in the last segment that its recovery would take
// for a torn write. A torn tail is cut here, before raft-wal reads it.
func (s *Store) checkSegments(m storedMeta) error {
	if !m.present {
		names, _ := filepath.Glob(filepath.Join(s.dir, "*.wal"))
		if len(names) > 0 {
			return damage(filepath.Join(s.dir, MetaFile), fmt.Errorf("the file is missing, but %d segment files (%s, ...) remain", len(names), filepath.Base(names[0])))
		}
		return nil
	}
	for i, si := range m.Segments {
		path := s.segmentPath(si)
		tail := si.SealTime.IsZero()
		var b []byte
		var err error
		if tail || si.IndexStart == 0 {
			b, err = os.ReadFile(path)
		} else {
			_, err = os.Stat(path) // its entries are checked after raft-wal opens it
		}
		if errors.Is(err, fs.ErrNotExist) {
			return damage(path, fmt.Errorf("the segment file is missing (%s lists it, with entries from %d)", MetaFile, si.BaseIndex))
		}
		if err != nil {
			return damage(path, err)
		}
		if !tail && si.IndexStart == 0 {
			// Sealed by a suffix deletion, which raft-wal v0.4.0 records
			// without writing the segment's index: it could not read the
			// segment again. Write the index now.
			start, err := writeIndex(path, b, si)
			if err != nil {
				return damage(path, err)
			}
			m.Segments[i].IndexStart = start
			if err := s.commitMeta(m.PersistentState); err != nil {
				return err
			}
		}
		if !tail {
			continue // sealed: every entry is checked after raft-wal opens it
		}
		if i != len(m.Segments)-1 {
			return damage(filepath.Join(s.dir, MetaFile), errors.New("an unsealed segment is not the last one"))
		}
		r, err := scanTail(b, si)
		if err == nil && r.unsealAt > 0 {
			if err := unsealSegment(path, r); err != nil {
				return err
			}
			if b, err = os.ReadFile(path); err != nil {
				return err
			}
			r, err = scanTail(b, si)
		}
		if err != nil {
			return damage(path, err)
		}
		if r.torn > 0 {
			// Entries after the last batch that was fsynced whole were never
			// acknowledged: cut them, so that nothing of them is read again.
			if err := truncateSync(path, r.cut, int64(si.SizeLimit)); err != nil {
				return err
			}
			s.Cut = TailCut{File: path, Bytes: r.torn, LastIndex: r.lastIndex}
		}
	}
	return nil
}

// unsealSegment turns the index frame at r.unsealAt into a commit frame for
// the entries before it (see tailReport.unsealAt); what followed it is then
// a torn tail, cut as usual.
func unsealSegment(path string, r tailReport) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	var h [frameHeaderLen]byte
	h[0] = frameCommit
	binary.LittleEndian.PutUint32(h[4:], r.unsealCRC)
	if _, err := f.WriteAt(h[:], r.unsealAt); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// commitMeta writes st into the metadata file (before raft-wal opens it).
func (s *Store) commitMeta(st types.PersistentState) error {
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	path := filepath.Join(s.dir, MetaFile)
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 2 * time.Second})
	if errors.Is(err, bbolt.ErrTimeout) {
		return fmt.Errorf("%w: %s (is another ticketd using this data directory?)", ErrLocked, path)
	}
	if err != nil {
		return damage(path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte(metadb.MetaBucket)).Put([]byte(metadb.MetaKey), raw)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// truncateSync cuts the file at size and preallocates it to limit again.
func truncateSync(path string, size, limit int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		_ = f.Close()
		return err
	}
	if limit > size {
		preallocate(f, limit)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// verify reads every entry back: each must be where the metadata says, at
// its own index, and match its checksum.
func (s *Store) verify(m storedMeta) error {
	first, err := s.w.FirstIndex()
	if err != nil {
		return damage(s.dir, err)
	}
	last, err := s.w.LastIndex()
	if err != nil {
		return damage(s.dir, err)
	}
	mark, _ := s.w.GetUint64(syncedKey)
	if mark > last {
		path := filepath.Join(s.dir, MetaFile)
		if n := len(m.Segments); n > 0 {
			path = s.segmentPath(m.Segments[n-1])
		}
		return damage(path, fmt.Errorf("the log ends at entry %d, but entry %d was written and synced before (%s records it): the end of the log was lost", last, mark, MetaFile))
	}
	s.marked = mark
	s.synced.Store(last)
	if last == 0 {
		return nil
	}
	var l raft.Log
	for i := first; i <= last; i++ {
		if err := s.getLog(i, &l); err != nil {
			return damage(s.fileOf(m, i), fmt.Errorf("log entry %d: %w", i, err))
		}
		if l.Index != i {
			return damage(s.fileOf(m, i), fmt.Errorf("log entry %d is stored as entry %d", i, l.Index))
		}
	}
	return nil
}

// fileOf names the segment that holds entry i.
func (s *Store) fileOf(m storedMeta, i uint64) string {
	path := s.dir
	for _, si := range m.Segments {
		if si.BaseIndex <= i {
			path = s.segmentPath(si)
		}
	}
	return path
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Close closes the store.
func (s *Store) Close() error {
	if s.stopMark != nil {
		close(s.stopMark)
		<-s.markDone
		s.stopMark = nil
	}
	s.recordMark()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeFiles()
}

func (s *Store) closeFiles() error {
	err := s.w.Close()
	if merr := s.meta.Close(); err == nil {
		err = merr
	}
	return err
}

// wrote notes a write's outcome: after a failed one, the next write
// opens the store again first (reopenIfBroken).
func (s *Store) wrote(err error) error {
	if err != nil {
		s.broken.Store(true)
	}
	return err
}

// reopenIfBroken returns with s.mu read-locked.
func (s *Store) reopenIfBroken() error {
	s.mu.RLock()
	if !s.broken.Load() {
		return nil
	}
	s.mu.RUnlock()
	s.mu.Lock()
	var err error
	if s.broken.Load() {
		_ = s.closeFiles()
		if err = s.open(); err == nil {
			s.broken.Store(false)
		}
	}
	s.mu.Unlock()
	s.mu.RLock()
	if err == nil && s.broken.Load() {
		err = errors.New("the Raft log store could not be opened again after a failed write")
	}
	return err
}

var _ interface {
	raft.LogStore
	raft.StableStore
} = (*Store)(nil)

// FirstIndex is the index of the first entry held (0: none).
func (s *Store) FirstIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.w.FirstIndex()
}

// LastIndex is the index of the last entry held (0: none).
func (s *Store) LastIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.w.LastIndex()
}

// GetLog reads entry index into l, checking its checksum.
func (s *Store) GetLog(index uint64, l *raft.Log) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.getLog(index, l)
}

func (s *Store) getLog(index uint64, l *raft.Log) error {
	var stored raft.Log
	if err := s.w.GetLog(index, &stored); err != nil {
		return err
	}
	return unseal(&stored, index, l)
}

// StoreLog appends one entry (one write, one fsync).
func (s *Store) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs appends entries: one write and one fsync for all of them.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	sealed := make([]*raft.Log, len(logs))
	for i, l := range logs {
		sealed[i] = seal(l)
	}
	err := s.reopenIfBroken()
	defer s.mu.RUnlock()
	if err != nil {
		return err
	}
	if err := s.wrote(s.w.StoreLogs(sealed)); err != nil {
		return err
	}
	if n := len(logs); n > 0 {
		s.synced.Store(logs[n-1].Index)
	}
	return nil
}

// DeleteRange deletes entries min to max (a prefix after a snapshot, or
// a follower's suffix that conflicts with its leader's log).
func (s *Store) DeleteRange(min, max uint64) error {
	err := s.reopenIfBroken()
	defer s.mu.RUnlock()
	if err != nil {
		return err
	}
	last, err := s.w.LastIndex()
	if err != nil {
		return err
	}
	if max < last {
		return s.wrote(s.w.DeleteRange(min, max)) // a prefix
	}
	// A suffix: the mark comes down first, durably, so that a crash in
	// between never leaves a mark above the end of the log.
	s.markMu.Lock()
	defer s.markMu.Unlock()
	if s.marked > min-1 {
		if err := s.w.SetUint64(syncedKey, min-1); err != nil {
			return s.wrote(err)
		}
		s.marked = min - 1
	}
	if err := s.wrote(s.w.DeleteRange(min, max)); err != nil {
		return err
	}
	s.synced.Store(min - 1)
	return nil
}

// Set, Get, SetUint64 and GetUint64 are the stable store (raft's term and
// vote), kept in the metadata file and fsynced on every change.
func (s *Store) Set(key, val []byte) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.w.Set(key, val)
}

func (s *Store) Get(key []byte) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.w.Get(key)
}

func (s *Store) SetUint64(key []byte, v uint64) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.w.SetUint64(key, v)
}

func (s *Store) GetUint64(key []byte) (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.w.GetUint64(key)
}

// segmentsOf lists dir's segment files, oldest first.
func segmentsOf(dir string) []string {
	names, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	sort.Strings(names)
	return names
}

// readTrimmed reads a file without its trailing zeros (a preallocated
// segment's unused end).
func readTrimmed(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	return bytes.TrimRight(b, "\x00"), err
}

// IsMonotonic tells Raft that the store holds one run of entries, with no
// gap: after restoring or installing a snapshot Raft deletes the whole log
// instead of leaving a gap before the next entry.
func (s *Store) IsMonotonic() bool { return true }
