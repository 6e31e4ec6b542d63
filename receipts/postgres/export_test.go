package postgres

// ChannelOf is the channel the store of table notifies on, for tests that listen to it.
func ChannelOf(table string) string {
	n, err := namesOf(table)
	if err != nil {
		panic(err)
	}
	return n.channel
}

// Slots is how many slots the capacity is split into.
const Slots = slots
