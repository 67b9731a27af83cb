module github.com/hookline/hookline/e2e

go 1.26.8
