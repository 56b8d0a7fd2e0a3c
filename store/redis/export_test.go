package redis

// HubStats reports how many tails s's hub holds and their bytes.
func HubStats(s *Store) (tails int, bytes int64) { return s.hub.stats() }

// PrefixOf is s's key prefix.
func PrefixOf(s *Store) string { return s.keys.prefix }
