package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ticketing-io/ticketing/fence"
)

// A holder with token 33 pauses; the key is taken over with token 34, whose
// write lands; when the first holder wakes up its write is refused. The
// program needs a SQLite driver registered as "sqlite" (for example
// modernc.org/sqlite, imported for its side effect); the fence package
// itself imports no driver. It prints:
//
//	<nil>
//	<nil>
//	true fence: stale token 33 for key "account/42": stored mark is 34 (a newer holder has committed; roll back)
//	balance: 200
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "fence-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()

	f, err := fence.New(fence.SQLite)
	if err != nil {
		panic(err)
	}
	if err := f.CreateTable(ctx, db); err != nil {
		panic(err)
	}
	if _, err := db.Exec("CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER)"); err != nil {
		panic(err)
	}

	// setBalance is what a ticket holder runs; token comes from t.Token().
	setBalance := func(token uint64, balance int) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := f.Check(ctx, tx, "account/42", token); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx,
			"INSERT INTO accounts VALUES (42, ?) ON CONFLICT (id) DO UPDATE SET balance = excluded.balance", balance); err != nil {
			return err
		}
		return tx.Commit()
	}

	fmt.Println(setBalance(33, 100))
	fmt.Println(setBalance(34, 200))
	err = setBalance(33, 150) // the paused holder wakes up
	fmt.Println(errors.Is(err, fence.ErrStaleToken), err)

	var balance int
	if err := db.QueryRow("SELECT balance FROM accounts WHERE id = 42").Scan(&balance); err != nil {
		panic(err)
	}
	fmt.Println("balance:", balance)
}
