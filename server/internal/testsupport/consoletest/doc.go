// Package consoletest tests the operator's console in a real browser and
// the operations files (deploy/grafana, deploy/prometheus) against real
// ticketd processes built from this checkout. The browser is Debian's
// headless Chromium (test.sh installs it), driven with chromedp.
package consoletest
