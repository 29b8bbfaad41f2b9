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
// Throws InputError when `version` is newer than this binary's kSchemaVersion.
void refuse_newer(const std::string& path, std::int64_t version);
// Brings a database of schema `version` (0: empty) to kSchemaVersion, inside the caller's
// transaction.
void upgrade(Db& db, int version);

}  // namespace lockstep::baseline::file
