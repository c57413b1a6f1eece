// Command franzgo is benchmarks/consume.py's franz-go contender: one share-group
// consumer (franz-go's kgo client) that polls until it has seen N records, touching
// each value, with every record accepted implicitly at the next poll, as the
// Python contenders' implicit mode does. It prints one line, "RESULT {json}", in
// the shape consume.py's Python workers print.
//
// Usage: franzgo BOOTSTRAP TOPIC GROUP N [MAX_RECORDS]   (MAX_RECORDS 0: default)
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func cpuSeconds() float64 {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return float64(u.Utime.Sec+u.Stime.Sec) + float64(u.Utime.Usec+u.Stime.Usec)/1e6
}

func main() {
	if len(os.Args) < 5 {
		fmt.Fprintln(os.Stderr, "usage: franzgo BOOTSTRAP TOPIC GROUP N [MAX_RECORDS]")
		os.Exit(2)
	}
	bootstrap, topic, group := os.Args[1], os.Args[2], os.Args[3]
	n, err := strconv.Atoi(os.Args[4])
	if err != nil || n <= 0 {
		fmt.Fprintf(os.Stderr, "N must be a positive integer, not %q\n", os.Args[4])
		os.Exit(2)
	}
	maxRecords := 0
	if len(os.Args) > 5 {
		if maxRecords, err = strconv.Atoi(os.Args[5]); err != nil || maxRecords < 0 {
			fmt.Fprintf(os.Stderr, "MAX_RECORDS must be 0 or more, not %q\n", os.Args[5])
			os.Exit(2)
		}
	}
	cpuBefore := cpuSeconds()
	start := time.Now()
	opts := []kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.ConsumeTopics(topic),
		kgo.ShareGroup(group),
	}
	if maxRecords > 0 {
		opts = append(opts, kgo.ShareMaxRecords(int32(maxRecords)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	count, nbytes := 0, 0
	var first time.Time
	for count < n && ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		fetches.EachError(func(t string, p int32, err error) {
			fmt.Fprintf(os.Stderr, "fetch %s-%d: %v\n", t, p, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			if count == 0 {
				first = time.Now()
			}
			count++
			nbytes += len(r.Value)
		})
	}
	last := time.Now()
	// Accept the last poll's records, and wait until the broker answered them.
	cl.MarkAcks(kgo.AckAccept)
	if err := cl.FlushAcks(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "flush:", err)
	}
	elapsed := time.Since(start).Seconds()
	cl.Close()
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	steady := 0.0
	if count > 0 {
		steady = last.Sub(first).Seconds()
	}
	out, _ := json.Marshal(map[string]any{
		"elapsed":      elapsed,
		"steady":       steady,
		"first_record": first.Sub(start).Seconds(),
		"records":      count,
		"bytes":        nbytes,
		"cpu_s":        cpuSeconds() - cpuBefore,
		"peak_rss_mb":  float64(u.Maxrss) / 1024,
	})
	fmt.Println("RESULT " + string(out))
}
