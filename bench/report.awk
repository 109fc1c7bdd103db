#!/usr/bin/awk -f
# bench/report.awk: make bench's raw runs (TSV: round, scenario, variant,
# synchronous_commit, server log bytes written, driver line) as markdown:
# the targets of issue 9, every variant's median over the rounds, backend
# memory.  Writes the targets' ratios to chart_data for bench/chart.gp.
# Variables: commit, date, cores, pg, rounds, seconds, elapsed, chart_data.
# The sweep scenario (issue 18) has a table of its own: holds swept per
# second, fresh and analyzed, and the live clients' figures with and without
# the sweep (its lines carry stmt_*, base_*, holds, rate, timeout_s).
# Ratios are holdcommit (the scenario's first variant) ÷ the variant, in
# calls/s: one per round, from the two runs of that round (close in time, so
# that a change in the machine's load touches both), and their median.

BEGIN {
    FS = "\t"
    # issue 9's goals: holdcommit ÷ this variant at least
    goal["hold", "plpgsql"] = 1.0
    goal["hold", "bare_update"] = 0.4
    goal["refusal", "point_select"] = 0.7
    goal["hot_product", "plpgsql"] = 1.2
    goal["commit", "plpgsql"] = 1.0
    goal["release", "plpgsql"] = 1.0
    goal["finalize", "plpgsql"] = 1.0
    goal["unreserve", "plpgsql"] = 1.0
    # issue 17: the lease and attempt calls, autonomous, against the PL/pgSQL
    # port that is not, with synchronous_commit on (each call pays its own
    # commit in its worker); off, the figures are shown without a goal
    goal["lease_acquire", "plpgsql"] = 0.7
    goal["lease_heartbeat", "plpgsql"] = 0.7
    goal["lease_release", "plpgsql"] = 0.7
    goal["lease_begin", "plpgsql"] = 0.7
    sync_only["lease_acquire", "plpgsql"] = "on"
    sync_only["lease_heartbeat", "plpgsql"] = "on"
    sync_only["lease_release", "plpgsql"] = "on"
    sync_only["lease_begin", "plpgsql"] = "on"
    goal["first_call", "after_analyze"] = 0.9     # after_create ÷ after_analyze: full speed at once
    nsc = 0
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

function sweep_table(    sc, v, y, va, sy, k, i, rate_cell, secs_cell, timeouts, failed, note, per) {
    sc = "sweep"
    if (has_targets || has_variants)
        printf "\n"
    printf "## Sweeping a backlog\n\n"
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
    for (v = 1; v <= nva[sc]; v++) {
        va = vas[sc, v]
        for (y = 1; y <= nsy[sc]; y++) {
            sy = sys[sc, y]
            k = sc SUBSEP va SUBSEP sy
            if (!(k in runs))
                continue
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
            printf "| %s | %s | %s%s | %s | %s | %.2f | %.2f | %s | %s |\n", va, sy, rate_cell, note, secs_cell,
                fmt_rate(med[k]), stat_of(k, p99), stat_of(k, base_p99), fmt_rate(stat_of(k, base_tps)),
                outcomes_of(k)
        }
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
        if (sc != "memory" && sc != "sweep")
            has_variants = 1
        if (sc == "sweep")
            has_sweep = 1
        for (v = 2; v <= nva[sc]; v++)
            if ((sc, vas[sc, v]) in goal)
                has_targets = 1
    }

    printf "# make bench: holdcommit against what an application would write\n\n"
    printf "Figures of the extension at commit `%s` (its last change to src/, sql/ or the control file),\n", commit
    printf "measured %s on %s cores, PostgreSQL %s.\n", date, cores, pg
    if (has_variants) {
        printf "Each variant ran %s rounds of %s s (pools: until used up), the order of the variants and of\n", rounds, seconds
        printf "synchronous_commit flipping between rounds, each on data loaded fresh for it. Figures are the\n"
        printf "medians of the rounds; a ratio is holdcommit ÷ the variant in calls/s, taken in each round from\n"
        printf "its two runs, close in time, and its median over the rounds. The whole run took %s s.\n", elapsed
    } else
        printf "The whole run took %s s.\n", elapsed
    printf "The machine is shared: compare ratios, not absolute figures; \"rounds\" shows the spread.\n\n"

    if (has_targets)
        printf "## Targets of issues 9 and 17\n\n"
    if (has_targets) {
        printf "| target | synchronous_commit | holdcommit ÷ alternative | rounds (min–max) | goal | met |\n"
        printf "|---|---|---|---|---|---|\n"
    }
    for (s = 1; s <= nsc; s++) {
        sc = scs[s]
        for (v = 2; v <= nva[sc]; v++) {
            va = vas[sc, v]
            if (!((sc, va) in goal))
                continue
            lbl = (sc == "first_call") ? "first_call: after_create ÷ after_analyze" : (sc " ÷ " va)
            for (y = 1; y <= nsy[sc]; y++) {
                sy = sys[sc, y]
                r = ratio(sc, va, sy)
                if (((sc, va) in sync_only) && sync_only[sc, va] != sy)
                    printf "| %s | %s | %.2f | %.2f–%.2f | — | — |\n", lbl, sy, r, rlo, rhi
                else
                    printf "| %s | %s | %.2f | %.2f–%.2f | ≥ %.1f | %s |\n", lbl, sy, r, rlo, rhi, goal[sc, va],
                        (r >= goal[sc, va]) ? "yes" : "**no**"
                chart[lbl, sy] = r
            }
            if (chart_data != "") {
                printf "\"%s\" %.3f %.3f %.2f\n", lbl, chart[lbl, "off"], chart[lbl, "on"], goal[sc, va] > chart_data
            }
        }
    }
    if (memline != "") {
        grow = kv(memline, "mem_end") - kv(memline, "mem_warm")
        if (!has_targets) {
            printf "## Targets of issues 9 and 17\n\n"
            printf "| target | synchronous_commit | holdcommit ÷ alternative | rounds (min–max) | goal | met |\n"
            printf "|---|---|---|---|---|---|\n"
        }
        printf "| backend memory over %d calls | off | %+.0f kB after warm-up | | flat | %s |\n",
            2 * kv(memline, "calls"), grow / 1024, (grow <= 1048576) ? "yes" : "**no**"
        has_targets = 1
    }

    if (has_variants) {
        if (has_targets)
            printf "\n"
        printf "## Every variant\n\n"
        printf "| scenario | variant | synchronous_commit | clients | calls/s | rounds (min–max) | p50 ms | p99 ms | outcomes | server log B/call | holdcommit ÷ this (rounds) |\n"
        printf "|---|---|---|---|---|---|---|---|---|---|---|\n"
    }
    for (s = 1; s <= nsc; s++) {
        sc = scs[s]
        if (sc == "memory" || sc == "sweep")
            continue
        for (y = 1; y <= nsy[sc]; y++) {
            sy = sys[sc, y]
            for (v = 1; v <= nva[sc]; v++) {
                va = vas[sc, v]
                k = sc SUBSEP va SUBSEP sy
                if (!(k in runs))
                    continue
                extra = (retries[k] > 0) ? sprintf(" (%d retries)", retries[k]) : ""
                printf "| %s | %s | %s | %s | %s | %s | %.2f | %.2f | %s%s | %.0f | %s |\n",
                    sc, va, sy, clients[k], fmt_rate(med[k]), lo_hi(k),
                    stat_of(k, p50), stat_of(k, p99), outcomes_of(k), extra,
                    (calls[k] > 0) ? logb[k] / calls[k] : 0,
                    (v == 1) ? "—" : sprintf("%.2f (%.2f–%.2f)", ratio(sc, va, sy), rlo, rhi)
            }
        }
    }

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
