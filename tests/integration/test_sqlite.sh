#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The sqlite3 shell under the preload: a table filled with 10,000 rows by a recursive CTE, an
# index, aggregates, a self-join, window functions, an update and a delete, then VACUUM and an
# integrity check, on a database file. sqlite allocates through malloc with its own size
# bookkeeping (malloc_usable_size), so this also checks our usable sizes.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

ta_require sqlite3 sqlite3

cat >"$TA_WORK/work.sql" <<'EOF'
PRAGMA journal_mode = WAL;
CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, val REAL, blob BLOB);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)
INSERT INTO t(id, grp, name, val, blob)
SELECT i, i % 37, printf('name-%05d-%s', i, substr('abcdefghijklmnopqrstuvwxyz', 1 + i % 26)),
       (i * 7919) % 10007 / 3.0, zeroblob(i % 700)
FROM n;
CREATE INDEX t_grp ON t(grp, name);
SELECT count(*), sum(id), min(name), max(name), round(avg(val), 6), sum(length(blob)) FROM t;
SELECT grp, count(*), round(sum(val), 3), group_concat(substr(name, 12), '') FROM t
GROUP BY grp ORDER BY grp LIMIT 10;
SELECT a.grp, count(*) FROM t a JOIN t b ON a.grp = b.grp AND b.id % 100 = 0
WHERE a.id % 10 = 0 GROUP BY a.grp ORDER BY 2 DESC, 1 LIMIT 5;
SELECT id, name, rank() OVER (PARTITION BY grp ORDER BY val DESC) AS r FROM t
WHERE grp = 5 ORDER BY r, id LIMIT 5;
UPDATE t SET name = upper(name) || name, blob = randomblob(0) WHERE id % 3 = 0;
DELETE FROM t WHERE id % 5 = 0;
SELECT count(*), sum(length(name)), max(name) FROM t;
SELECT length(group_concat(name || val, ',')) FROM (SELECT * FROM t ORDER BY id);
VACUUM;
PRAGMA integrity_check;
SELECT count(DISTINCT grp), total(val) FROM t;
EOF

work()
{
	sqlite3 test.db <"$TA_WORK/work.sql"
	sqlite3 test.db 'SELECT count(*) FROM t WHERE name LIKE "%-0042%";'
	sqlite3 :memory: 'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n
		WHERE i < 100000) SELECT count(*), sum(i), max(length(hex(i))) FROM n;'
}
compare_runs sqlite work
