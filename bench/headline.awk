# headline.awk picks the tables docs/performance.md shows out of run.sh's tables.md: the
# headline figures, client CPU per call (HTTP, to every server, and in memory), calls/s over
# HTTP, what a session start costs (CPU, requests, bytes and allocations), what an idle session
# holds (heap and goroutines), and the retry machinery's cost.
/^### / {
	section = $2 " " $3
	title = substr($0, 5)
	shown = 0
	next
}
/^\| / && !intable {
	intable = 1
	unit = $2
	want = section == "Headline figures" ||
		(section == "tools/call over" && (unit == "cpu-sec/op" || unit == "calls/s")) ||
		(section == "tools/call in" && unit == "cpu-sec/op") ||
		(section == "Session start" && (unit == "cpu-sec/op" || unit == "reqs/op" || unit == "B/op" || unit == "allocs/op")) ||
		(section == "Idle session" && (unit == "heap-B/session" || unit == "goroutines/session")) ||
		(section == "Our retry" && unit == "cpu-sec/op")
	if (want && !shown) {
		print "**" title "**"
		print ""
		shown = 1
	}
}
intable && want { print }
/^$/ { intable = 0 }
