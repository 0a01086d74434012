CREATE TABLE corpora (
	id INTEGER NOT NULL, 
	name VARCHAR(200) NOT NULL, 
	spec TEXT NOT NULL, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (name)
);

CREATE TABLE tokenizers (
	id INTEGER NOT NULL, 
	name VARCHAR(200) NOT NULL, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (name)
);

CREATE TABLE ingests (
	id INTEGER NOT NULL, 
	corpus_id INTEGER NOT NULL, 
	source TEXT NOT NULL, 
	sha256 VARCHAR(64) NOT NULL, 
	size_bytes BIGINT NOT NULL, 
	n_words BIGINT NOT NULL, 
	n_distinct BIGINT NOT NULL, 
	created_at DATETIME NOT NULL, 
	generation INTEGER DEFAULT '1' NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(corpus_id) REFERENCES corpora (id) ON DELETE CASCADE
);

CREATE INDEX ix_ingests_corpus_sha256 ON ingests (corpus_id, sha256);

CREATE TABLE generations (
	corpus_id INTEGER NOT NULL, 
	number INTEGER NOT NULL, 
	n_sources INTEGER NOT NULL, 
	size_bytes BIGINT NOT NULL, 
	n_words BIGINT NOT NULL, 
	n_distinct BIGINT NOT NULL, 
	digest VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	ordinal_end BIGINT, 
	PRIMARY KEY (corpus_id, number), 
	FOREIGN KEY(corpus_id) REFERENCES corpora (id) ON DELETE CASCADE
);

CREATE TABLE word_counts (
	corpus_id INTEGER NOT NULL, 
	word BLOB NOT NULL, 
	count BIGINT NOT NULL, 
	changed_in INTEGER DEFAULT '1' NOT NULL, 
	ordinal BIGINT, 
	PRIMARY KEY (corpus_id, word), 
	FOREIGN KEY(corpus_id) REFERENCES corpora (id) ON DELETE CASCADE
)
 WITHOUT ROWID

;

CREATE TABLE word_count_history (
	corpus_id INTEGER NOT NULL, 
	word BLOB NOT NULL, 
	count BIGINT NOT NULL, 
	valid_from INTEGER NOT NULL, 
	valid_to INTEGER NOT NULL, 
	FOREIGN KEY(corpus_id) REFERENCES corpora (id) ON DELETE CASCADE
);

CREATE INDEX ix_word_count_history_corpus_to ON word_count_history (corpus_id, valid_to);

CREATE TABLE versions (
	id INTEGER NOT NULL, 
	tokenizer_id INTEGER NOT NULL, 
	number INTEGER NOT NULL, 
	parent_id INTEGER, 
	corpus_id INTEGER, 
	spec TEXT NOT NULL, 
	target_vocab_size INTEGER, 
	target_merges INTEGER, 
	min_frequency INTEGER NOT NULL, 
	max_token_length INTEGER, 
	status VARCHAR(16) NOT NULL, 
	source VARCHAR(32) NOT NULL, 
	corpus_digest VARCHAR(64), 
	fingerprint VARCHAR(64), 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	corpus_generation INTEGER, 
	corpus_name VARCHAR(200), 
	PRIMARY KEY (id), 
	UNIQUE (tokenizer_id, number), 
	FOREIGN KEY(tokenizer_id) REFERENCES tokenizers (id) ON DELETE CASCADE, 
	FOREIGN KEY(parent_id) REFERENCES versions (id), 
	FOREIGN KEY(corpus_id) REFERENCES corpora (id)
);

CREATE TABLE aliases (
	tokenizer_id INTEGER NOT NULL, 
	name VARCHAR(200) NOT NULL, 
	version_id INTEGER NOT NULL, 
	PRIMARY KEY (tokenizer_id, name), 
	FOREIGN KEY(tokenizer_id) REFERENCES tokenizers (id) ON DELETE CASCADE, 
	FOREIGN KEY(version_id) REFERENCES versions (id) ON DELETE CASCADE
);

CREATE TABLE merges (
	version_id INTEGER NOT NULL, 
	rank INTEGER NOT NULL, 
	left_id INTEGER NOT NULL, 
	right_id INTEGER NOT NULL, 
	token_id INTEGER NOT NULL, 
	count BIGINT NOT NULL, 
	PRIMARY KEY (version_id, rank), 
	FOREIGN KEY(version_id) REFERENCES versions (id) ON DELETE CASCADE
);

CREATE TABLE tokens (
	version_id INTEGER NOT NULL, 
	id INTEGER NOT NULL, 
	bytes BLOB NOT NULL, 
	kind VARCHAR(8) NOT NULL, 
	PRIMARY KEY (version_id, id), 
	FOREIGN KEY(version_id) REFERENCES versions (id) ON DELETE CASCADE
);

CREATE TABLE version_facts (
	version_id INTEGER NOT NULL, 
	format INTEGER NOT NULL, 
	packed BLOB NOT NULL, 
	fast_problem TEXT, 
	digest VARCHAR(64) NOT NULL, 
	PRIMARY KEY (version_id), 
	FOREIGN KEY(version_id) REFERENCES versions (id) ON DELETE CASCADE
);

CREATE TABLE version_inputs (
	version_id INTEGER NOT NULL, 
	position INTEGER NOT NULL, 
	corpus_id INTEGER NOT NULL, 
	corpus_generation INTEGER NOT NULL, 
	weight BIGINT NOT NULL, 
	PRIMARY KEY (version_id, position), 
	FOREIGN KEY(version_id) REFERENCES versions (id) ON DELETE CASCADE, 
	FOREIGN KEY(corpus_id) REFERENCES corpora (id)
);

CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
)