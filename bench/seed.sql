-- bench/seed.sql: the plain-SQL tables of the seed articles, in the schema
-- bench_seed, for make bench's client-side variants:
--   000 (unique assets): a conditional UPDATE of the asset, then an INSERT of
--       the reservation with a unique idempotency key, sent by the client;
--   002 (counted stock): SELECT ... FOR UPDATE then UPDATE (pessimistic), and
--       a version column with retry (optimistic).
-- The statements themselves are in bench/scenarios.bash.

DROP SCHEMA IF EXISTS bench_seed CASCADE;
CREATE SCHEMA bench_seed;

CREATE TABLE bench_seed.assets (
    id                      varchar(64) PRIMARY KEY,
    name                    varchar(255) NOT NULL DEFAULT '',
    status                  varchar(20) NOT NULL DEFAULT 'AVAILABLE',
    hold_expires_at         timestamptz NULL,
    current_reservation_id  varchar(64) NULL,
    version                 integer NOT NULL DEFAULT 1
);

CREATE TABLE bench_seed.reservations (
    id               varchar(64) PRIMARY KEY,
    asset_id         varchar(64) NOT NULL REFERENCES bench_seed.assets (id),
    buyer_id         varchar(64) NOT NULL,
    idempotency_key  varchar(128) UNIQUE NOT NULL,
    status           varchar(20) NOT NULL,
    expires_at       timestamptz NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE bench_seed.inventories (
    product_id  bigint PRIMARY KEY,
    stock       integer NOT NULL,
    reserved    integer NOT NULL DEFAULT 0,
    version     integer NOT NULL DEFAULT 0,
    updated_at  timestamp NULL
);
