// A Redis-compatible server for Argo CD's cache in the local test environment, so that nothing has to
// be installed by hand: miniredis (the in-memory Redis Argo CD's own tests run against; the version
// Argo CD's module graph pins) listening on one loopback address.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "address to listen on (loopback only)")
	flag.Parse()
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr(*addr); err != nil {
		fmt.Fprintf(os.Stderr, "redis: cannot listen on %s: %v\n", *addr, err)
		os.Exit(1)
	}
	fmt.Printf("redis (miniredis) listening on %s\n", m.Addr())
	// miniredis moves its clock only when told: advance it with the wall clock so keys with a TTL
	// expire as they would on a real Redis and the cache does not grow without bound.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	last := time.Now()
	for {
		select {
		case now := <-tick.C:
			m.FastForward(now.Sub(last))
			last = now
		case <-stop:
			m.Close()
			return
		}
	}
}
