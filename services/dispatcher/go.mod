module github.com/hookline/hookline/services/dispatcher

go 1.26.8
