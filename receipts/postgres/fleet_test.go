package postgres_test

// envRole makes the test binary a server process of the fleet test.
const envRole = "RECEIPTS_PG_ROLE"

func serveFleetMember() int { return 1 }
