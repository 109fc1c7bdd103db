#!/usr/bin/awk -f
# bench/report.awk: make bench's raw runs (TSV: round, scenario, variant,
# synchronous_commit, server log bytes written, driver line) as markdown:
# the targets of issues 9 and 17 and those of issue 36, every variant's
# median over the rounds, backend memory.  Writes the targets' ratios to
# chart_data for bench/chart.gp.
# Variables: commit, date, cores, pg, rounds, seconds, elapsed, chart_data.
# The sweep scenario (issue 18) has a table of its own: holds swept per
# second, fresh and analyzed, and the live clients' figures with and without
# the sweep (its lines carry stmt_*, base_*, holds, rate, timeout_s).
# So has the sold_out scenario (issue 20): its rate is units sold per second
# until sold out, and whether every unit was sold exactly once (its lines
# carry stock, reserved, reservations, ledger, check, sold_out, exact).
# Ratios are holdcommit (the scenario's first variant) ÷ the variant, in
# calls/s: one per round, from the two runs of that round (close in time, so
# that a change in the machine's load touches both), and their median.

BEGIN {
    FS = "\t"
    # target(ISSUES, SCENARIO, VARIANT, GOAL_OFF, GOAL_ON): holdcommit ÷ this
    # variant at least GOAL_OFF with synchronous_commit off, GOAL_ON with it
    # on; "" for no goal with that setting (the figure is shown without one).
    # Issue 9's goals (the hold of an available asset against the PL/pgSQL
    # port and a bare UPDATE; the hot product against the port):
    target("9 and 17", "hold", "plpgsql", 1.0, 1.0)
    target("9 and 17", "hold", "bare_update", 0.4, 0.4)
    target("9 and 17", "hot_product", "plpgsql", 1.2, 1.2)
    # issue 17: the lease and attempt calls, autonomous, against the PL/pgSQL
    # port that is not, with synchronous_commit on (each call pays its own
    # commit in its worker); off, the figures are shown without a goal
    target("9 and 17", "lease_acquire", "plpgsql", "", 0.7)
    target("9 and 17", "lease_heartbeat", "plpgsql", "", 0.7)
    target("9 and 17", "lease_release", "plpgsql", "", 0.7)
    target("9 and 17", "lease_begin", "plpgsql", "", 0.7)
    # issue 36 (0.4.0), which takes over the goals of issues 9 and 20 that it
    # raises or keeps: a reserve on distinct products and a hold that
    # reclaims an expired one past the seed's SQL; a refusal near a point
    # SELECT; the hot product as a user creates it (hc_stock_set alone) as
    # fast as 64 distinct ones, well past one WAL flush per sale under the
    # row lock (a bare one-row UPDATE) when commits wait for their flush; the
    # sell-out exact (below); the other calls at least the PL/pgSQL port; full
    # speed at once after the install
    target("36", "distinct_products", "seed_plpgsql", 1.2, 1.2)
    target("36", "hold_reclaim", "seed_update_insert", 1.2, 1.2)
    target("36", "hold_reclaim", "bare_update", 0.6, 0.6)
    target("36", "refusal", "point_select", 0.8, 0.8)
    target("36", "hot_product", "holdcommit_distinct", 0.6, 0.8)
    target("36", "hot_product", "bare_update", "", 2.5)
    target("36", "hot_product", "holdcommit_spread", "", "")   # spread by an operator before the run (issue 20)
    target("36", "sold_out", "seed_plpgsql", "", "")
    target("36", "commit", "plpgsql", 1.0, 1.0)
    target("36", "release", "plpgsql", 1.0, 1.0)
    target("36", "finalize", "plpgsql", 1.0, 1.0)
    target("36", "unreserve", "plpgsql", 1.0, 1.0)
    target("36", "first_call", "after_analyze", 0.9, 0.9)   # after_create ÷ after_analyze
    # issue 37: 64 buyers take the 2 best seats each of a pool until it is
    # sold out, against ORDER BY rank LIMIT n FOR UPDATE SKIP LOCKED
    target("37", "seats", "plpgsql", 1.0, 1.0)
    # issue 38: a write of the application's under its lease's token (BEGIN,
    # hc_lock_check, one INSERT, COMMIT) against the same check in PL/pgSQL
    # and against the write alone: what the fence costs
    target("38", "lease_check", "plpgsql", "", "")
    target("38", "lease_check", "bare_write", "", "")
    nsc = 0
}

function target(issues, sc, va, g_off, g_on) {
    if (!(issues in seen_issues)) {
        seen_issues[issues] = 1
        issue_list[++nissues] = issues
    }
    target_of[sc, va] = issues
    if (g_off != "")
        goal[sc, va, "off"] = g_off
    if (g_on != "")
        goal[sc, va, "on"] = g_on
}

# value of key k in the driver line
function kv(line, k,    n, parts, i, eq) {
    n = split(line, parts, " ")
    for (i = 1; i <= n; i++) {
        eq = index(parts[i], "=")
        if (substr(parts[i], 1, eq - 1) == k)
            return substr(parts[i], eq + 1)
    }
    return ""
}

# median of the n values v[1..n] (sorted in place)
function median(v, n,    i, j, t) {
    for (i = 2; i <= n; i++)
        for (j = i; j > 1 && v[j - 1] > v[j]; j--) {
            t = v[j]; v[j] = v[j - 1]; v[j - 1] = t
        }
    if (n == 0)
        return 0
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}

function fmt_rate(x) {
    return x >= 100 ? sprintf("%.0f", x) : sprintf("%.1f", x)
}

{
    sc = $2; va = $3; sy = $4; line = $6
    if (!(sc in seen_sc)) { seen_sc[sc] = 1; scs[++nsc] = sc }
    if (!((sc, va) in seen_va)) { seen_va[sc, va] = 1; vas[sc, ++nva[sc]] = va }
    if (!((sc, sy) in seen_sy)) { seen_sy[sc, sy] = 1; sys[sc, ++nsy[sc]] = sy }
    k = sc SUBSEP va SUBSEP sy
    n = ++runs[k]
    tps[k, n] = kv(line, "calls_per_s") + 0
    # a sell-out's rate: the units sold (its calls that succeeded) per second
    if (sc == "sold_out") {
        so_sold[k, n] = 0
        no = split(kv(line, "outcomes"), oc, ",")
        for (i = 1; i <= no; i++)
            if (oc[i] ~ /^00000:/)
                so_sold[k, n] = substr(oc[i], 7) + 0
        so_s[k, n] = kv(line, "seconds") + 0
        tps[k, n] = (so_s[k, n] > 0) ? so_sold[k, n] / so_s[k, n] : 0
        so_done[k, n] = kv(line, "sold_out")
        so_exact[k, n] = kv(line, "exact")
        so_stock = kv(line, "stock")
        so_timeout = kv(line, "timeout_s")
    }
    by_round[k, $1] = tps[k, n]
    if ($1 + 0 > maxround)
        maxround = $1 + 0
    p50[k, n] = kv(line, "p50_ms") + 0
    p99[k, n] = kv(line, "p99_ms") + 0
    calls[k] += kv(line, "calls")
    logb[k] += $5
    retries[k] += kv(line, "retries")
    clients[k] = kv(line, "clients")
    # outcomes: CODE:count,...
    no = split(kv(line, "outcomes"), oc, ",")
    for (i = 1; i <= no; i++) {
        split(oc[i], pair, ":")
        if (!((k, pair[1]) in outc))
            codes[k] = codes[k] (codes[k] == "" ? "" : " ") pair[1]
        outc[k, pair[1]] += pair[2]
    }
    if (sc == "memory")
        memline = line
    if (sc == "sweep") {
        sw_out[k, n] = kv(line, "stmt_outcome")
        sw_s[k, n] = kv(line, "stmt_s") + 0
        sw_holds[k, n] = kv(line, "stmt_result") + 0
        sw_max[k, n] = kv(line, "max_ms") + 0
        base_p99[k, n] = kv(line, "base_p99_ms") + 0
        base_tps[k, n] = kv(line, "base_calls_per_s") + 0
        sw_backlog = kv(line, "holds")
        sw_rate = kv(line, "rate")
        sw_timeout = kv(line, "timeout_s")
    }
}

function stat_of(k, arr,    i, v) {
    for (i = 1; i <= runs[k]; i++)
        v[i] = arr[k, i]
    return median(v, runs[k])
}

function lo_hi(k,    i, lo, hi) {
    lo = hi = tps[k, 1]
    for (i = 2; i <= runs[k]; i++) {
        if (tps[k, i] < lo) lo = tps[k, i]
        if (tps[k, i] > hi) hi = tps[k, i]
    }
    return fmt_rate(lo) "–" fmt_rate(hi)
}

function outcomes_of(k,    n, c, i, s) {
    n = split(codes[k], c, " ")
    s = ""
    for (i = 1; i <= n; i++)
        s = s (s == "" ? "" : ", ") c[i] " " outc[k, c[i]]
    return s
}

# holdcommit ÷ variant per round; sets rlo, rhi; returns the median
function ratio(sc, va, sy,    h, k, r, n, v) {
    h = sc SUBSEP vas[sc, 1] SUBSEP sy
    k = sc SUBSEP va SUBSEP sy
    n = 0
    for (r = 1; r <= maxround; r++)
        if (((h, r) in by_round) && ((k, r) in by_round) && by_round[k, r] > 0)
            v[++n] = by_round[h, r] / by_round[k, r]
    if (n == 0) {
        rlo = rhi = 0
        return 0
    }
    r = median(v, n)
    rlo = v[1]
    rhi = v[n]
    return r
}

# a section's heading, after a blank line
function section(title) {
    printf "\n## %s\n\n", title
}

function goal_cells(sc, va, sy, r) {
    if (!((sc, va, sy) in goal))
        return "— | —"
    return sprintf("≥ %.1f | %s", goal[sc, va, sy], (r >= goal[sc, va, sy]) ? "yes" : "**no**")
}

# the targets of ISSUES ("9 and 17", "36"): one row per target and
# synchronous_commit; chart_data gets "label" ratio-off ratio-on goal-off
# goal-on (NaN: none) for the targets with a goal
function targets_table(issues,    s, v, y, sc, va, sy, lbl, r, grow, k, i, n, ok) {
    section(sprintf("Targets of issue%s %s", (issues ~ / and /) ? "s" : "", issues))
    printf "| target | synchronous_commit | holdcommit ÷ alternative | rounds (min–max) | goal | met |\n"
    printf "|---|---|---|---|---|---|\n"
    for (s = 1; s <= nsc; s++) {
        sc = scs[s]
        for (v = 2; v <= nva[sc]; v++) {
            va = vas[sc, v]
            if (!((sc, va) in target_of) || target_of[sc, va] != issues)
                continue
            lbl = (sc == "first_call") ? "first_call: after_create ÷ after_analyze" : (sc " ÷ " va)
            delete chart
            for (y = 1; y <= nsy[sc]; y++) {
                sy = sys[sc, y]
                r = ratio(sc, va, sy)
                printf "| %s | %s | %.2f | %.2f–%.2f | %s |\n", lbl, sy, r, rlo, rhi, goal_cells(sc, va, sy, r)
                chart[sy] = r
            }
            if (chart_data != "" && (((sc, va, "off") in goal) || ((sc, va, "on") in goal)))
                printf "\"%s\" %.3f %.3f %s %s\n", lbl, chart["off"], chart["on"],
                    ((sc, va, "off") in goal) ? goal[sc, va, "off"] : "NaN",
                    ((sc, va, "on") in goal) ? goal[sc, va, "on"] : "NaN" > chart_data
        }
    }
    # holdcommit sells out exactly, in every round
    if (issues == target_of["sold_out", "seed_plpgsql"] && (("sold_out", "holdcommit") in seen_va)) {
        for (y = 1; y <= nsy["sold_out"]; y++) {
            sy = sys["sold_out", y]
            k = "sold_out" SUBSEP "holdcommit" SUBSEP sy
            if (!(k in runs))
                continue
            n = ok = 0
            for (i = 1; i <= runs[k]; i++) {
                n++
                ok += (so_exact[k, i] == "yes")
            }
            printf "| sold_out: %s units by %s clients, each sold once, the rest RS002 | %s | %s units/s, sold out in %.1f s (%d of %d rounds exact) | %s | exact | %s |\n",
                so_stock, clients[k], sy, fmt_rate(med[k]), stat_of(k, so_s), ok, n, lo_hi(k), (ok == n) ? "yes" : "**no**"
        }
    }
    if (issues == "36" && memline != "") {
        grow = kv(memline, "mem_end") - kv(memline, "mem_warm")
        printf "| backend memory over %d calls | off | %+.0f kB after warm-up | | flat | %s |\n",
            2 * kv(memline, "calls"), grow / 1024, (grow <= 1048576) ? "yes" : "**no**"
    }
}

# the rows of scenario sc's table that ran, by synchronous_commit then
# variant (by variant first when variant_first): returns how many; sets
# row_k[i] (the runs' key), row_va[i], row_sy[i] and row_v[i] (the variant's
# place, 1 for holdcommit)
function rows_of(sc, variant_first,    n, a, b, v, y) {
    n = 0
    for (a = 1; a <= (variant_first ? nva[sc] : nsy[sc]); a++)
        for (b = 1; b <= (variant_first ? nsy[sc] : nva[sc]); b++) {
            v = variant_first ? a : b
            y = variant_first ? b : a
            if (!((sc SUBSEP vas[sc, v] SUBSEP sys[sc, y]) in runs))
                continue
            row_k[++n] = sc SUBSEP vas[sc, v] SUBSEP sys[sc, y]
            row_va[n] = vas[sc, v]
            row_sy[n] = sys[sc, y]
            row_v[n] = v
        }
    return n
}

# issue 20's end of the stock, every variant
function sold_out_table(    sc, r, nr, k, i, n, exact, done, secs) {
    sc = "sold_out"
    section("Selling out")
    printf "Issue 20: one product of %s units, %s clients each reserving 1 unit a call with a new key, each\n", so_stock, clients[sc SUBSEP vas[sc, 1] SUBSEP sys[sc, 1]]
    printf "stopping at its first `RS002`, so that a run lasts until the product is sold out (at most %s s).\n", so_timeout
    printf "Units sold/s: the calls that succeeded ÷ the run's time. Exact: %s calls succeeded and one per\n", so_stock
    printf "client was `RS002`, nothing else, and afterwards the product's `reserved`, its live reservations'\n"
    printf "qty and its ledger rows' reserved delta are all %s: `hc_check()` empty for holdcommit, the same\n", so_stock
    printf "sums for the ports. Medians of the rounds.\n\n"
    printf "| variant | synchronous_commit | units sold/s | rounds (min–max) | seconds to sell out | p50 ms | p99 ms | outcomes | exact (rounds) | holdcommit ÷ this (rounds) |\n"
    printf "|---|---|---|---|---|---|---|---|---|---|\n"
    nr = rows_of(sc, 0)
    for (r = 1; r <= nr; r++) {
        k = row_k[r]
        n = runs[k]
        exact = done = 0
        for (i = 1; i <= n; i++) {
            exact += (so_exact[k, i] == "yes")
            done += (so_done[k, i] == "yes")
        }
        secs = sprintf("%.2f", stat_of(k, so_s))
        if (done < n)
            secs = secs sprintf(" (%d of %d rounds not sold out in %s s)", n - done, n, so_timeout)
        printf "| %s | %s | %s | %s | %s | %.2f | %.2f | %s | %s | %s |\n",
            row_va[r], row_sy[r], fmt_rate(med[k]), lo_hi(k), secs, stat_of(k, p50), stat_of(k, p99), outcomes_of(k),
            (exact == n) ? sprintf("yes (%d of %d)", exact, n) : sprintf("**no** (%d of %d)", exact, n),
            (row_v[r] == 1) ? "—" : sprintf("%.2f (%.2f–%.2f)", ratio(sc, row_va[r], row_sy[r]), rlo, rhi)
    }
}

# median of arr[k, i] over the runs i of k whose sweep ended (not timed out);
# sets ndone, lo, hi
function done_stat(k, arr,    i, v) {
    ndone = 0
    for (i = 1; i <= runs[k]; i++)
        if (sw_out[k, i] == "00000")
            v[++ndone] = arr[k, i]
    if (ndone == 0)
        return 0
    lo = hi = v[1]
    for (i = 2; i <= ndone; i++) {
        if (v[i] < lo) lo = v[i]
        if (v[i] > hi) hi = v[i]
    }
    return median(v, ndone)
}

function sweep_table(    sc, row, nr, k, i, rate_cell, secs_cell, timeouts, failed, note, per) {
    sc = "sweep"
    section("Sweeping a backlog")
    printf "Issue 18: a new install (the extension created just now, autovacuum off for its tables) with\n"
    printf "%s expired holds (made by `hc_hold`, aged by a superuser's `UPDATE`), no `ANALYZE` (fresh) or\n", sw_backlog
    printf "`ANALYZE` after the load (analyzed), swept by hand by `SELECT * FROM hc_sweep()` (one statement,\n"
    printf "at most %s s: `statement_timeout`) while %s live clients, each on an asset of its own, call\n", sw_timeout, clients[sc SUBSEP vas[sc, 1] SUBSEP sys[sc, 1]]
    printf "`hc_release(hc_hold(...))` (one transaction a call) %s; their figures without\n",
        (sw_rate + 0 > 0) ? sprintf("%s times a second in all", sw_rate) : "flat out"
    printf "the sweep are from %s s just before it, on the same data. A timed-out sweep swept nothing (it rolled\n", seconds
    printf "back): its rate is below backlog ÷ timeout. Medians of %d rounds (swept/s: min–max).\n\n", runs[sc SUBSEP vas[sc, 1] SUBSEP sys[sc, 1]]
    printf "| state | synchronous_commit | holds swept/s (rounds) | sweep s | live tps | live p99 ms | live p99 without sweep ms | live tps without sweep | live outcomes |\n"
    printf "|---|---|---|---|---|---|---|---|---|\n"
    nr = rows_of(sc, 1)
    for (row = 1; row <= nr; row++) {
        k = row_k[row]
        timeouts = failed = 0
        for (i = 1; i <= runs[k]; i++) {
            per[k, i] = (sw_s[k, i] > 0) ? sw_holds[k, i] / sw_s[k, i] : 0
            if (sw_out[k, i] == "57014")
                timeouts++
            else if (sw_out[k, i] != "00000")
                failed++
        }
        note = ""
        if (timeouts > 0 && timeouts < runs[k])
            note = note sprintf("; %d of %d rounds timed out", timeouts, runs[k])
        if (failed > 0)
            note = note sprintf("; %d of %d rounds failed", failed, runs[k])
        r = done_stat(k, per)
        if (ndone == 0) {
            rate_cell = (timeouts > 0) ? sprintf("timeout (< %s)", fmt_rate(sw_backlog / sw_timeout)) : "failed"
            secs_cell = (timeouts > 0) ? sprintf("> %s", sw_timeout) : "—"
        } else {
            rate_cell = sprintf("%s (%s–%s)", fmt_rate(r), fmt_rate(lo), fmt_rate(hi))
            secs_cell = sprintf("%.2f", done_stat(k, sw_s))
        }
        printf "| %s | %s | %s%s | %s | %s | %.2f | %.2f | %s | %s |\n", row_va[row], row_sy[row], rate_cell, note, secs_cell,
            fmt_rate(med[k]), stat_of(k, p99), stat_of(k, base_p99), fmt_rate(stat_of(k, base_tps)),
            outcomes_of(k)
    }
}

END {
    for (s = 1; s <= nsc; s++) {
        sc = scs[s]
        for (v = 1; v <= nva[sc]; v++)
            for (y = 1; y <= nsy[sc]; y++) {
                k = sc SUBSEP vas[sc, v] SUBSEP sys[sc, y]
                if (k in runs)
                    med[k] = stat_of(k, tps)
            }
    }

    # which sections have something to show
    for (s = 1; s <= nsc; s++) {
        sc = scs[s]
        if (sc != "memory" && sc != "sweep" && sc != "sold_out")
            has_variants = 1
        if (sc == "sweep")
            has_sweep = 1
        if (sc == "sold_out")
            has_sold_out = 1
        for (v = 2; v <= nva[sc]; v++)
            if ((sc, vas[sc, v]) in target_of)
                has_targets[target_of[sc, vas[sc, v]]] = 1
    }
    if (memline != "")
        has_targets["9 and 17"] = 1
    if ((("sold_out", "holdcommit") in seen_va))
        has_targets["20"] = 1

    printf "# make bench: holdcommit against what an application would write\n\n"
    printf "Figures of the extension at commit `%s` (its last change to src/, sql/ or the control file),\n", commit
    printf "measured %s on %s cores, PostgreSQL %s.\n", date, cores, pg
    if (has_variants || has_sold_out) {
        printf "Each variant ran %s rounds of %s s (pools: until used up%s), the order of the variants and of\n",
            rounds, seconds, has_sold_out ? "; sold_out: until sold out" : ""
        printf "synchronous_commit flipping between rounds, each on data loaded fresh for it. Figures are the\n"
        printf "medians of the rounds; a ratio is holdcommit ÷ the variant in calls/s, taken in each round from\n"
        printf "its two runs, close in time, and its median over the rounds. The whole run took %s s.\n", elapsed
    } else
        printf "The whole run took %s s.\n", elapsed
    printf "The machine is shared: compare ratios, not absolute figures; \"rounds\" shows the spread.\n"

    for (h = 1; h <= nissues; h++)
        if (issue_list[h] in has_targets)
            targets_table(issue_list[h])

    if (has_variants) {
        section("Every variant")
        printf "| scenario | variant | synchronous_commit | clients | calls/s | rounds (min–max) | p50 ms | p99 ms | outcomes | server log B/call | holdcommit ÷ this (rounds) |\n"
        printf "|---|---|---|---|---|---|---|---|---|---|---|\n"
    }
    for (s = 1; s <= nsc; s++) {
        sc = scs[s]
        if (sc == "memory" || sc == "sweep" || sc == "sold_out")
            continue
        nr = rows_of(sc, 0)
        for (row = 1; row <= nr; row++) {
            k = row_k[row]
            extra = (retries[k] > 0) ? sprintf(" (%d retries)", retries[k]) : ""
            printf "| %s | %s | %s | %s | %s | %s | %.2f | %.2f | %s%s | %.0f | %s |\n",
                sc, row_va[row], row_sy[row], clients[k], fmt_rate(med[k]), lo_hi(k),
                stat_of(k, p50), stat_of(k, p99), outcomes_of(k), extra,
                (calls[k] > 0) ? logb[k] / calls[k] : 0,
                (row_v[row] == 1) ? "—" : sprintf("%.2f (%.2f–%.2f)", ratio(sc, row_va[row], row_sy[row]), rlo, rhi)
        }
    }

    if (has_sold_out)
        sold_out_table()
    if (has_sweep)
        sweep_table()

    if (memline != "") {
        printf "\n## Backend memory over %d calls in one session\n\n", 2 * kv(memline, "calls")
        printf "hc_hold + hc_release pairs on 1,000 assets, one connection, sampled every 5%% of the calls.\n\n"
        printf "| measure | start | after the first 5%% | end | max |\n|---|---|---|---|---|\n"
        printf "| pg_backend_memory_contexts, kB | %.0f | %.0f | %.0f | %.0f |\n",
            kv(memline, "mem_start") / 1024, kv(memline, "mem_warm") / 1024,
            kv(memline, "mem_end") / 1024, kv(memline, "mem_max") / 1024
        if (kv(memline, "rss_anon_start") >= 0)
            printf "| backend RssAnon, kB | %s | %s | %s | %s |\n",
                kv(memline, "rss_anon_start"), kv(memline, "rss_anon_warm"),
                kv(memline, "rss_anon_end"), kv(memline, "rss_anon_max")
        printf "\n%s calls/s; per pair p50 %s ms, p99 %s ms; outcomes (pairs) %s.\n", fmt_rate(kv(memline, "calls_per_s") * 2),
            kv(memline, "p50_ms"), kv(memline, "p99_ms"), kv(memline, "outcomes")
    }
}
