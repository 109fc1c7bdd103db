# "ok" / "not ok" lines for the test scripts that make test counts (sourced).
#   check WHAT GOT WANT    print "ok - WHAT" or "not ok - WHAT" with both values

check() {
    if [ "$2" == "$3" ]; then
        echo "ok - $1"
    else
        echo "not ok - $1"
        echo "#   got: $2"
        echo "#   expected: $3"
    fi
}
