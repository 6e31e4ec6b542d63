# headline.awk picks the tables the top-level README shows out of run.sh's tables.md: client CPU
# per call (HTTP and in memory), calls/s over HTTP, the requests a session start takes, idle
# goroutines per session, and the retry machinery's cost.
/^### / {
	section = $2 " " $3
	title = substr($0, 5)
	shown = 0
	next
}
/^\| / && !intable {
	intable = 1
	unit = $2
	want = (section == "tools/call over" && (unit == "cpu-sec/op" || unit == "calls/s")) ||
		(section == "tools/call in" && unit == "cpu-sec/op") ||
		(section == "Session start" && unit == "reqs/op") ||
		(section == "Idle session" && unit == "goroutines/session") ||
		(section == "Our retry" && unit == "cpu-sec/op")
	if (want && !shown) {
		print "**" title "**"
		print ""
		shown = 1
	}
}
intable && want { print }
/^$/ { intable = 0 }
