// Package board is the team board the controller serves: a team's runs,
// its queue with each waiting run's estimated start, its quota and its
// GPU-hours, as server-rendered HTML that works without JavaScript.
package board
