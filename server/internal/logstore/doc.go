// Package logstore is Ticketing's Raft log store and stable store:
// hashicorp/raft-wal (segment files, one write and one fsync per append)
// with integrity checks of Ticketing's own around it.
//
// What raft-wal does not check, this package does:
//
//   - Every entry carries a CRC-32C over all its bytes (the package's codec;
//     raft-wal checks a CRC only for the last batch of its last segment). It
//     is checked on every read, and Open reads every entry once.
//   - The last segment is checked before raft-wal recovers it: a torn tail
//     (a batch that was being written when the server stopped, never
//     fsynced whole and so never acknowledged) is cut back to the last batch
//     that was; damage before that (an intact entry with a later index after
//     a damaged one, or a batch written whole that does not match its CRC)
//     is refused. raft-wal alone would take the damage for a torn tail and
//     drop every entry after it silently.
//   - A missing metadata file with segments left, or a missing segment, is
//     refused (raft-wal would start an empty log, or recreate the last
//     segment empty).
//
// Damage is reported as a *DamageError (errors.Is ErrDamaged) naming the
// file; the caller turns it into the operator's guidance. MigrateBolt moves
// an existing raft-boltdb raft.db into a new store, safely across crashes.
//
// The tests damage stores in every way listed (truncated tails, flipped
// bytes in sealed and last segments, missing segments and metadata, a full
// disk on a small tmpfs, as root) and kill a child process appending to a
// store with SIGKILL again and again (12 times by default;
// TICKETING_LOGSTORE_KILL_CYCLES=N for N).
//
//	s, err := logstore.Open(logstore.StorePath(raftDir), logstore.Options{})
//	r, err := raft.NewRaft(conf, fsm, s, s, snaps, transport)
package logstore
