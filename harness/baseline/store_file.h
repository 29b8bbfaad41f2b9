#pragma once
// The baseline database as a file: its schema and migrations, and the checks made before and
// after opening it (store_file.cpp). Store (store.h) is the only user.
#include <cstdint>
#include <string>

#include "harness/baseline/sqlite.h"
#include "harness/baseline/store.h"

namespace lockstep::baseline::file {

// Checks `path` for `access` and returns a connection to it; see Store::Store. Throws
// InputError naming the file for a missing, foreign, newer, damaged or unwritable database.
Db open_checked(const std::string& path, Access access);
void enable_wal(const Db& db);
// "" when `path`'s -shm and -wal files, where present, are regular files this user can read and
// write; else what is wrong with the first that is not, naming it, its owner and what to do.
// (SQLite opens a database whose -shm or -wal it cannot write read-only: every write then fails
// with "read-only" though the file and its directory are writable.)
std::string side_file_problem(const std::string& path);
// Makes `path`'s -shm and -wal usable by this user when another user left them behind (their
// read-only access creates them with that user's ownership): when no connection has the database
// open, a -shm (SQLite rebuilds it from the -wal) or an empty -wal is removed, and a -wal that
// holds data is replaced by a copy of it that this user owns, all under a lock that keeps
// connections out meanwhile. Throws InputError naming the file and what to do when it cannot
// (the database is open elsewhere, or the directory does not let this user replace the file).
void recover_side_files(const std::string& path);
// Throws InputError when `version` is newer than this binary's kSchemaVersion.
void refuse_newer(const std::string& path, std::int64_t version);
// Brings a database of schema `version` (0: empty) to kSchemaVersion, inside the caller's
// transaction.
void upgrade(Db& db, int version);

}  // namespace lockstep::baseline::file
