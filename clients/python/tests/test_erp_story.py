"""The ERP story of make run (test/demo/erp-story.sh), driven end to end through the package by
examples/erp_story.py: its output is test/demo/erp-story.expected, section by section, and the
database agrees: one invoice, no invariant broken."""
import os
import subprocess
import sys
import unittest

import holdcommit as hc
from support import APP, REPO, conninfo, connect


def sections(text):
    return [s.strip("\n") for s in text.strip("\n").split("\n\n")]


class ErpStory(unittest.TestCase):
    def test_the_story(self):
        """erp_story.py, as the application role (workers) and a superuser (operator)"""
        script = os.path.join(REPO, "clients", "python", "examples", "erp_story.py")
        run = subprocess.run([sys.executable, script, conninfo(APP), conninfo()], capture_output=True,
                             text=True, timeout=120, cwd="/")
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(os.path.join(REPO, "test", "demo", "erp-story.expected"), encoding="utf-8") as f:
            want = sections(f.read())
        got = sections(run.stdout)
        self.assertEqual(len(got), len(want), run.stdout)
        for g, w in zip(got, want):
            with self.subTest(w.splitlines()[0]):
                self.assertEqual(g, w)
        with self.subTest("one invoice in the ERP, the one recorded"), connect() as conn:
            self.assertEqual(conn.execute("SELECT array_agg(invoice_no) FROM public.erp_invoices"
                                          " WHERE payment_id = 'PAY-7781'").fetchone()[0], ["INV-000004"])
            self.assertEqual(conn.execute("SELECT status, external_ref FROM holdcommit.hc_attempts"
                                          " WHERE resource = 'PAY-7781'").fetchone(), ("COMPLETED", "INV-000004"))
            self.assertEqual(hc.check(conn), [])
        with self.subTest("four owners, one per run or delivery, none a role's"), connect() as conn:
            owners = [o for (o,) in conn.execute(
                "SELECT DISTINCT detail::jsonb ->> 'owner' FROM holdcommit.hc_ledger"
                " WHERE kind = 'resource' AND entity_id = 'PAY-7781' AND detail::jsonb ? 'owner'")]
            self.assertEqual(len(owners), 4, owners)
            self.assertFalse({"webhook", "scheduler"} & set(owners), owners)
