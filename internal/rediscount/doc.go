// Package rediscount counts the commands a go-redis client sends, by name,
// pipelined ones included, with each EVALSHA named by its script: what
// `wasmsched bench` reports per run and what the command-count tests hold
// to a number. It counts; it never times.
package rediscount
