package main

import (
	"github.com/suzuran-app/suzuran/engine/prefixstore"
)

// openPrefixStore opens the folder of prefix snapshots under the user
// cache folder (engine/prefixstore), with its default size limit, for the
// commands that run an engine without the app's service (the terminal
// chat, `serve --no-ui`); nil, with a line to warn, when it cannot be
// opened: the engine then keeps its snapshots in memory only.
func openPrefixStore(warn func(string)) *prefixstore.Store {
	s, err := prefixstore.Open(prefixstore.Options{Log: warn})
	if err != nil {
		warn("prefix snapshots are kept in memory only: " + err.Error())
		return nil
	}
	return s
}
