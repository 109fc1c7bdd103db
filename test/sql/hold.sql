-- Unique assets: hold, commit, release, extend.
-- Reservation ids and times are random or moving, so the output shows
-- statuses, buyers, flags and durations; ids are kept in psql variables.

-- A digest of all holdcommit state, to prove that a failed call changed nothing.
CREATE FUNCTION state() RETURNS text LANGUAGE sql AS $$
    SELECT md5(concat_ws('|',
        (SELECT string_agg(concat_ws(',', id, status, hold_expires_at, current_reservation_id, version), ';' ORDER BY id) FROM hc_assets),
        (SELECT string_agg(concat_ws(',', id, status, expires_at), ';' ORDER BY id) FROM hc_reservations),
        (SELECT count(*) FROM hc_idempotency_keys),
        (SELECT count(*) FROM hc_ledger)))
$$;

SELECT (hc_asset_add('LOT-1', 'Diesel locomotive')).status;
SELECT id, name, status FROM hc_asset_add('LOT-2');
INSERT INTO hc_assets (id, name) VALUES ('LOT-3', 'Plate B 1 HC'), ('LOT-4', 'Crane');

-- A hold: HELD for ttl, a new reservation (HTTP 201).
SELECT reservation_id AS r1, expires_at - created_at AS ttl
  FROM hc_hold('LOT-1', 'alice', 'key-1', '10 minutes') \gset
SELECT :'r1' ~ '^res_[0-9A-HJKMNP-TV-Z]{26}$' AS ulid, :'ttl' AS ttl;
SELECT status, current_reservation_id = :'r1' AS mine, hold_expires_at IS NOT NULL AS until
  FROM hc_assets WHERE id = 'LOT-1';

-- The same key and arguments again: the stored row, replayed (HTTP 200).
SELECT reservation_id = :'r1' AS same, asset_id, buyer_id, status, replayed
  FROM hc_hold('LOT-1', 'alice', 'key-1', '600 seconds');
-- What a replay compares: the SHA-256 of the function and the arguments, each
-- as length:value; (the ttl in microseconds).  Stored keys outlive an update
-- of the library, so these bytes never change.
SELECT fingerprint = sha256('7:hc_hold;5:LOT-1;5:alice;9:600000000;') AS fingerprint_as_ever
  FROM hc_reservations WHERE id = :'r1';
-- The same key with other arguments: RS005, whatever the asset.
SELECT state() AS before \gset
SELECT outcome($$SELECT hc_hold('LOT-1', 'alice', 'key-1', '5 minutes')$$);
SELECT outcome($$SELECT hc_hold('LOT-2', 'alice', 'key-1')$$);
-- The key is a per-request secret: the message, detail and hint of RS005
-- do not carry it (the context is the caller's own statement); it is named
-- by the start of its SHA-256.
DO $$
DECLARE
    m text; d text; h text;
BEGIN
    PERFORM hc_hold('LOT-2', 'alice', 'key-1');
EXCEPTION WHEN SQLSTATE 'RS005' THEN
    GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    RAISE NOTICE 'the key in the error: %; named by its hash: %',
        strpos(concat_ws('|', m, d, h), 'key-1') > 0,
        strpos(m, 'sha256:' || left(encode(sha256('key-1'), 'hex'), 8)) > 0;
END
$$;
-- Another buyer: RS001 at once (HTTP 409); an unknown asset: RS006.
SELECT outcome($$SELECT hc_hold('LOT-1', 'bob', 'key-2')$$);
SELECT outcome($$SELECT hc_hold('LOT-9', 'bob', 'key-2')$$);
SELECT state() = :'before' AS unchanged;
-- A failed hold stored nothing: key-2 is still free.
SELECT buyer_id, status, replayed FROM hc_hold('LOT-2', 'bob', 'key-2');

-- The error in full, as an application sees it.
\set VERBOSITY default
SELECT hc_hold('LOT-9', 'carol', 'key-3');

-- Commit: SOLD; again: replayed (the webhook arrives twice).
SELECT status, replayed FROM hc_commit(:'r1');
SELECT status, replayed FROM hc_commit(:'r1');
SELECT status, current_reservation_id = :'r1' AS sold_to_r1, hold_expires_at FROM hc_assets WHERE id = 'LOT-1';
SELECT outcome($$SELECT hc_hold('LOT-1', 'carol', 'key-4')$$);
SELECT outcome(format('SELECT hc_release(%L)', :'r1'));
SELECT outcome(format('SELECT hc_extend(%L, %L)', :'r1', '1 minute'));
SELECT outcome($$SELECT hc_commit('res_unknown')$$);

-- Release: AVAILABLE at once; again: replayed; then commit: RS004.
SELECT reservation_id AS r2 FROM hc_hold('LOT-3', 'dave', 'key-5') \gset
SELECT status, replayed FROM hc_release(:'r2');
SELECT status, replayed FROM hc_release(:'r2');
SELECT status, current_reservation_id, hold_expires_at FROM hc_assets WHERE id = 'LOT-3';
SELECT outcome(format('SELECT hc_commit(%L)', :'r2'));
SELECT outcome(format('SELECT hc_commit(%L, true)', :'r2'));
SELECT outcome(format('SELECT hc_extend(%L, %L)', :'r2', '1 minute'));

-- Extend: later of itself and now + ttl, never past created_at + max_hold.
SELECT reservation_id AS r3, expires_at AS e3 FROM hc_hold('LOT-3', 'erin', 'key-6', '1 minute') \gset
SELECT expires_at = :'e3' AS unchanged FROM hc_extend(:'r3', '10 seconds');
SELECT expires_at - created_at > '9 minutes' AS longer, replayed FROM hc_extend(:'r3', '10 minutes');
SELECT expires_at - created_at AS capped FROM hc_extend(:'r3', '24 hours');
SELECT a.hold_expires_at = r.expires_at AS asset_agrees
  FROM hc_assets a JOIN hc_reservations r ON r.id = a.current_reservation_id WHERE a.id = 'LOT-3';

-- Expiry: a short hold runs out.
SELECT reservation_id AS r4 FROM hc_hold('LOT-4', 'frank', 'key-7', '50 milliseconds') \gset
SELECT pg_sleep(0.1);
SELECT outcome(format('SELECT hc_commit(%L)', :'r4'));
SELECT outcome(format('SELECT hc_extend(%L, %L)', :'r4', '1 minute'));
-- late_ok: still free, so it commits after all.
SELECT status, replayed FROM hc_commit(:'r4', late_ok => true);

-- Passive reclamation: the next buyer takes an expired hold.
SELECT id AS rb FROM hc_reservations WHERE asset_id = 'LOT-2' AND status = 'HELD' \gset
SELECT status FROM hc_release(:'rb');
SELECT reservation_id AS r5 FROM hc_hold('LOT-2', 'gina', 'key-10', '1 minute') \gset
SELECT outcome($$SELECT hc_hold('LOT-2', 'hugo', 'key-9')$$);
SELECT age_hold(:'r5', '2 minutes');
SELECT buyer_id, status, replayed FROM hc_hold('LOT-2', 'hugo', 'key-11');
SELECT status FROM hc_reservations WHERE id = :'r5';
-- The reclaimed buyer's late commit fails: someone else has the asset.
SELECT outcome(format('SELECT hc_commit(%L, true)', :'r5'));
-- Releasing an expired hold changes nothing and returns it.
SELECT status, replayed FROM hc_release(:'r5');
-- A replay returns the stored row, whatever happened since.
SELECT status, replayed FROM hc_hold('LOT-2', 'gina', 'key-10', '1 minute');

-- An expired hold that nobody reclaimed: release ends it as EXPIRED.
INSERT INTO hc_assets (id) VALUES ('LOT-5');
SELECT reservation_id AS r6 FROM hc_hold('LOT-5', 'ivan', 'key-12', '50 milliseconds') \gset
SELECT pg_sleep(0.1);
SELECT status, replayed FROM hc_release(:'r6');
SELECT status FROM hc_assets WHERE id = 'LOT-5';

-- The ledger keeps both ends of an extension.
SELECT reservation_id AS r8 FROM hc_hold('LOT-5', 'kate', 'key-14', '1 minute') \gset
SELECT expires_at - created_at > '5 minutes' AS extended FROM hc_extend(:'r8', '5 minutes');
SELECT split_part(detail, ' -> ', 1) <> split_part(detail, ' -> ', 2) AS both_ends
  FROM hc_ledger WHERE event = 'extend' AND reservation_id = :'r8';
SELECT status FROM hc_release(:'r8');

-- Only READ COMMITTED sees the latest state: other isolation levels are refused.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT outcome($$SELECT hc_hold('LOT-5', 'x', 'key-15')$$);
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT outcome($$SELECT hc_hold('LOT-5', 'x', 'key-15')$$);
ROLLBACK;

-- Bad input: the standard SQLSTATEs, naming the argument, nothing changed.
SELECT state() AS before \gset
SELECT outcome($$SELECT hc_hold(NULL, 'x', 'k')$$);
SELECT outcome($$SELECT hc_hold('LOT-5', NULL, 'k')$$);
SELECT outcome($$SELECT hc_hold('LOT-5', 'x', NULL)$$);
SELECT outcome($$SELECT hc_hold('LOT-5', 'x', 'k', NULL)$$);
SELECT outcome($$SELECT hc_hold('', 'x', 'k')$$);
SELECT outcome($$SELECT hc_hold('LOT-5', '', 'k')$$);
SELECT outcome($$SELECT hc_hold('LOT-5', 'x', '')$$);
SELECT outcome($$SELECT hc_hold(repeat('a', 65), 'x', 'k')$$);
SELECT outcome($$SELECT hc_hold('LOT-5', repeat('é', 33), 'k')$$);
SELECT outcome($$SELECT hc_hold('LOT-5', 'x', repeat('k', 256))$$);
SELECT outcome($$SELECT hc_hold('LOT-5', 'x', 'k', '0 seconds')$$);
SELECT outcome($$SELECT hc_hold('LOT-5', 'x', 'k', '-1 minute')$$);
SELECT outcome($$SELECT hc_hold('LOT-5', 'x', 'k', '25 hours')$$);
SELECT outcome($$SELECT hc_hold('LOT-5', 'x', 'k', '1 month')$$);
SELECT outcome($$SELECT hc_commit(NULL)$$);
SELECT outcome($$SELECT hc_commit('')$$);
SELECT outcome(format('SELECT hc_commit(%L, NULL)', :'r3'));
SELECT outcome($$SELECT hc_release(NULL)$$);
SELECT outcome($$SELECT hc_extend(NULL, '1 minute')$$);
SELECT outcome(format('SELECT hc_extend(%L, NULL)', :'r3'));
SELECT outcome(format('SELECT hc_extend(%L, %L)', :'r3', '0 seconds'));
SELECT outcome($$SELECT hc_asset_add(NULL, 'x')$$);
SELECT outcome($$SELECT hc_asset_add('LOT-6', NULL)$$);
SELECT outcome($$SELECT hc_asset_add('LOT-1', 'again')$$);
SELECT state() = :'before' AS unchanged;

-- Settings: holdcommit.max_ttl bounds every ttl.
SET holdcommit.max_ttl = '1min';
SELECT outcome($$SELECT hc_hold('LOT-5', 'x', 'k', '2 minutes')$$);
RESET holdcommit.max_ttl;
SHOW holdcommit.idempotency_retention;
SHOW holdcommit.max_ttl;
SHOW holdcommit.max_hold;

-- Idempotency retention: an old key is forgotten and can be used anew.
SET holdcommit.idempotency_retention = '1s';
SELECT reservation_id AS r7 FROM hc_hold('LOT-5', 'judy', 'key-13', '50 milliseconds') \gset
SELECT pg_sleep(1.1);
SELECT reservation_id <> :'r7' AS new_reservation, replayed FROM hc_hold('LOT-5', 'judy', 'key-13', '50 milliseconds');
RESET holdcommit.idempotency_retention;

-- The ledger: one row per state change, with who and where from.
SELECT event, source, function, buyer_id, reserved_delta, stock_delta, actor
  FROM hc_ledger WHERE kind = 'asset' AND entity_id IN ('LOT-2', 'LOT-4') ORDER BY entity_id, seq;
-- Each asset orders its own ledger rows: seq is the asset's version after
-- the change, so the last row's seq is the asset's version now.
SELECT a.id, a.version = max(l.seq) AS seq_is_version
  FROM hc_assets a JOIN hc_ledger l ON l.kind = 'asset' AND l.entity_id = a.id
 WHERE a.id IN ('LOT-2', 'LOT-4') GROUP BY a.id, a.version ORDER BY a.id;

-- Invariants hold; a broken one is reported.
SELECT * FROM hc_check();
UPDATE hc_assets SET status = 'AVAILABLE', current_reservation_id = NULL WHERE id = 'LOT-1';
SELECT invariant, subject = :'r1' AS r1 FROM hc_check();
UPDATE hc_assets SET status = 'SOLD', current_reservation_id = :'r1' WHERE id = 'LOT-1';
SELECT * FROM hc_check();

-- Results carry the declared row type (hc_assets), so a stored result is
-- readable in any session, also after the table dropped a column.
CREATE TABLE stored_assets AS SELECT hc_asset_add('LOT-T', 'stored') AS a;
\c
SELECT (a).id, (a).status, pg_typeof(a) FROM stored_assets;
ALTER TABLE hc_assets ADD COLUMN scratch integer;
ALTER TABLE hc_assets DROP COLUMN scratch;
\c
SELECT id, name, status FROM hc_asset_add('LOT-U', 'after a dropped column');
DROP TABLE stored_assets;

-- A ttl so negative that it overflows is still "not positive", not "too long".
SELECT outcome($$SELECT hc_hold('LOT-U', 'x', 'k-neg', '-178000000 years')$$);
SELECT outcome($$SELECT hc_hold('LOT-U', 'x', 'k-neg', '-178000000 years 1 hour')$$);
SELECT outcome($$SELECT hc_hold('LOT-U', 'x', 'k-big', '178000000 years')$$);

-- A READ ONLY transaction reads but never writes: the replay of a hold is
-- answered; a new hold (on a held asset too: no refusal from a state it could
-- not act on), a commit, a release (even of a hold already released) are
-- refused with 25006 before they read anything, and nothing changes.
SELECT count(hc_asset_add('RO-1')), count(hc_asset_add('RO-2'));
SELECT reservation_id AS ro1 FROM hc_hold('RO-1', 'b1', 'ro-key-1') \gset
SELECT reservation_id AS ro2 FROM hc_hold('RO-2', 'b1', 'ro-key-2') \gset
SELECT status FROM hc_release(:'ro2');
SELECT count(*) AS ledger_rows FROM hc_ledger WHERE entity_id IN ('RO-1', 'RO-2') \gset
BEGIN READ ONLY;
SELECT outcome($$SELECT hc_hold('RO-1', 'b2', 'ro-key-3')$$);
SELECT status, replayed FROM hc_hold('RO-1', 'b1', 'ro-key-1');
SELECT outcome($$SELECT hc_hold('RO-2', 'b2', 'ro-key-4')$$);
SELECT outcome(format('SELECT hc_commit(%L)', :'ro1'));
SELECT outcome(format('SELECT hc_release(%L)', :'ro1'));
SELECT outcome(format('SELECT hc_release(%L)', :'ro2'));
COMMIT;
SELECT id, status FROM hc_assets WHERE id IN ('RO-1', 'RO-2') ORDER BY id;
SELECT count(*) = :ledger_rows AS ledger_unchanged FROM hc_ledger WHERE entity_id IN ('RO-1', 'RO-2');
