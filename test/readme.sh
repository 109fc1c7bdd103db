#!/usr/bin/env bash
# Each SQL block of README.md stands verbatim in test/sql/readme.sql, whose
# output the regression suite checks.
# Prints "ok - ..." / "not ok - ..." lines; exits 0.
set -uo pipefail
cd "$(dirname "$0")/.."

perl -0777 -e '
    open my $r, "<", "README.md" or die "README.md: $!"; my $readme = <$r>;
    open my $t, "<", "test/sql/readme.sql" or die "test/sql/readme.sql: $!"; my $tested = <$t>;
    my $i = 0;
    while ($readme =~ /```sql\n(.*?)```/sg) {
        $i++;
        print((index($tested, $1) >= 0 ? "ok" : "not ok"), " - README sql block $i is tested in test/sql/readme.sql\n");
    }
    print "not ok - README.md has sql blocks\n" if $i == 0;' || echo "not ok - read README.md and test/sql/readme.sql"
exit 0
